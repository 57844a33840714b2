/**
 * A tiny OTLP/HTTP (JSON) traces receiver: every span the services post to `<url>/v1/traces`
 * (OTEL_EXPORTER_OTLP_ENDPOINT=<url>) lands in `spans`, with its service, attributes and times.
 * The tracing tests check the trees; the pipeline benchmark times a turn's stages from them.
 */
import { createServer } from 'node:http';
import { gunzipSync } from 'node:zlib';

export interface ReceivedSpan {
  readonly traceId: string;
  readonly spanId: string;
  readonly parentSpanId: string;
  readonly name: string;
  /** OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer. */
  readonly kind: number;
  readonly service: string;
  readonly attributes: Record<string, unknown>;
  /** Wall-clock start and end, ms since the epoch (fractional). */
  readonly startMs: number;
  readonly endMs: number;
}

export interface OtlpReceiver {
  /** The base URL to set as OTEL_EXPORTER_OTLP_ENDPOINT. */
  readonly url: string;
  readonly spans: ReceivedSpan[];
  close(): Promise<void>;
}

interface OtlpValue {
  stringValue?: string;
  intValue?: string | number;
  boolValue?: boolean;
  arrayValue?: { values?: OtlpValue[] };
}

function valueOf(v: OtlpValue | undefined): unknown {
  if (!v) return undefined;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.arrayValue) return (v.arrayValue.values ?? []).map(valueOf);
  return undefined;
}

/** Nanoseconds since the epoch (a decimal string in OTLP JSON) → ms, keeping the fraction. */
const nanosToMs = (nanos: unknown): number => {
  const n = BigInt(String(nanos ?? '0'));
  return Number(n / 1_000_000n) + Number(n % 1_000_000n) / 1e6;
};

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      let body = Buffer.concat(chunks);
      if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
      if (req.url !== '/v1/traces' || !String(req.headers['content-type']).includes('json')) {
        res.writeHead(415).end();
        return;
      }
      const doc = JSON.parse(body.toString('utf8')) as {
        resourceSpans?: {
          resource?: { attributes?: { key: string; value: OtlpValue }[] };
          scopeSpans?: { spans?: Record<string, unknown>[] }[];
        }[];
      };
      for (const rs of doc.resourceSpans ?? []) {
        const service = String(valueOf(rs.resource?.attributes?.find((a) => a.key === 'service.name')?.value));
        for (const ss of rs.scopeSpans ?? []) {
          for (const s of ss.spans ?? []) {
            const attributes: Record<string, unknown> = {};
            for (const a of (s.attributes as { key: string; value: OtlpValue }[] | undefined) ?? []) attributes[a.key] = valueOf(a.value);
            spans.push({
              traceId: String(s.traceId),
              spanId: String(s.spanId),
              parentSpanId: String(s.parentSpanId ?? ''),
              name: String(s.name),
              kind: Number(s.kind),
              service,
              attributes,
              startMs: nanosToMs(s.startTimeUnixNano),
              endMs: nanosToMs(s.endTimeUnixNano),
            });
          }
        }
      }
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    spans,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
