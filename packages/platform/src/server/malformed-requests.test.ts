/**
 * Request bodies that do not parse answer INVALID_ARGUMENT on every protocol of a real
 * startGrpcServer (h2c and HTTP/1.1), and nothing else is touched: an implementation's own
 * INTERNAL "parse binary" error (e.g. from a call it made) stays what it was.
 */
import http2 from 'node:http2';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport, createGrpcWebTransport } from '@connectrpc/connect-node';
import { health, reflection } from '@bedrock/contracts';
import { startGrpcServer, type GrpcServer } from './grpc-server.ts';
import { createLogger } from './logger.ts';
import { malformedRequestMessage } from './malformed-requests.ts';
import { envelope, grpcStatusOf, lastFrame } from '@bedrock/testkit/raw-rpc';

const logger = createLogger({ service: 'test', level: 'silent' });
const CHECK = '/grpc.health.v1.Health/Check';
const WATCH = '/grpc.health.v1.Health/Watch';
const REFLECT = '/grpc.reflection.v1.ServerReflection/ServerReflectionInfo';
/** Field 1 (service, a string) promising 16 bytes and carrying 1. */
const TRUNCATED = Buffer.from([0x0a, 0x10, 0x61]);
const TYPE = 'grpc.health.v1.HealthCheckRequest';

let h2: GrpcServer;
let h1: GrpcServer;

beforeAll(async () => {
  const routes = (router: Parameters<Parameters<typeof startGrpcServer>[0]['routes']>[0]) => {
    router.service(health.Health, {
      check(req) {
        // An implementation passing on a parse error of its own upstream call: not the caller's fault.
        if (req.service === 'upstream-broken') throw new ConnectError('parse binary: premature EOF', Code.Internal);
        return create(health.HealthCheckResponseSchema, { status: health.HealthCheckResponse_ServingStatus.SERVING });
      },
      async *watch() {
        yield create(health.HealthCheckResponseSchema, { status: health.HealthCheckResponse_ServingStatus.SERVING });
      },
    });
    router.rpc(reflection.ServerReflection.method.serverReflectionInfo, async function* (requests) {
      for await (const r of requests) yield create(reflection.ServerReflectionResponseSchema, { validHost: r.host });
    });
  };
  h2 = await startGrpcServer({ routes, port: 0, host: '127.0.0.1', logger });
  h1 = await startGrpcServer({ routes, port: 0, host: '127.0.0.1', logger, protocol: 'http1' });
});

afterAll(async () => {
  await Promise.all([h2?.close(0), h1?.close(0)]);
});

interface RawAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly trailers: Record<string, string>;
  readonly body: Buffer;
}

/** One POST over h2c with `body` (written in one piece, or as several writes). */
function h2post(url: string, path: string, headers: Record<string, string>, body: Buffer | Buffer[]): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(url);
    session.on('error', reject);
    const stream = session.request({ ':method': 'POST', ':path': path, ...headers });
    const chunks: Buffer[] = [];
    let status = 0;
    const head: Record<string, string> = {};
    const trailers: Record<string, string> = {};
    const copy = (from: http2.IncomingHttpHeaders, to: Record<string, string>) => {
      for (const [k, v] of Object.entries(from)) if (typeof v === 'string') to[k] = v;
    };
    stream.on('response', (h) => {
      status = Number(h[':status']);
      copy(h, head);
    });
    stream.on('trailers', (t) => copy(t, trailers));
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('error', reject);
    stream.on('close', () => {
      session.close();
      resolve({ status, headers: head, trailers, body: Buffer.concat(chunks) });
    });
    for (const part of Array.isArray(body) ? body : [body]) stream.write(part);
    stream.end();
  });
}

async function h1post(url: string, path: string, headers: Record<string, string>, body: Buffer): Promise<RawAnswer> {
  const res = await fetch(url + path, { method: 'POST', headers, body });
  return { status: res.status, headers: Object.fromEntries(res.headers), trailers: {}, body: Buffer.from(await res.arrayBuffer()) };
}

const expectMessage = (message: string, format: 'protobuf binary' | 'JSON') => {
  expect(message).toMatch(new RegExp(`^request body is not a valid ${TYPE.replace(/\./g, '\\.')}: .+ \\(${format}\\)$`));
};

describe('malformed request bodies answer INVALID_ARGUMENT', () => {
  it('Connect unary, protobuf and JSON, over h2c and HTTP/1.1: HTTP 400 with code invalid_argument', async () => {
    for (const [post, url] of [
      [h2post, () => h2.url],
      [h1post, () => h1.url],
    ] as const) {
      const proto = await post(url(), CHECK, { 'content-type': 'application/proto' }, TRUNCATED);
      expect(proto.status).toBe(400);
      const protoError = JSON.parse(proto.body.toString()) as { code: string; message: string };
      expect(protoError.code).toBe('invalid_argument');
      expectMessage(protoError.message, 'protobuf binary');
      expect(protoError.message).toContain('premature EOF');
      expect(Number(proto.headers['content-length'])).toBe(proto.body.length);

      const json = await post(url(), CHECK, { 'content-type': 'application/json' }, Buffer.from('{"service": '));
      expect(json.status).toBe(400);
      const jsonError = JSON.parse(json.body.toString()) as { code: string; message: string };
      expect(jsonError.code).toBe('invalid_argument');
      expectMessage(jsonError.message, 'JSON');

      const wrongType = await post(url(), CHECK, { 'content-type': 'application/json' }, Buffer.from('{"service": 5}'));
      expect(JSON.parse(wrongType.body.toString())).toMatchObject({
        code: 'invalid_argument',
        message: expect.stringContaining('grpc.health.v1.HealthCheckRequest.service'),
      });
    }
  });

  it('gRPC: status 3 in the trailers, unary and server-streaming', async () => {
    for (const path of [CHECK, WATCH]) {
      const a = await h2post(h2.url, path, { 'content-type': 'application/grpc', te: 'trailers' }, envelope(TRUNCATED));
      const { code, message } = grpcStatusOf(a);
      expect(code).toBe(Code.InvalidArgument);
      expectMessage(message, 'protobuf binary');
    }
    const json = await h2post(
      h2.url,
      CHECK,
      { 'content-type': 'application/grpc+json', te: 'trailers' },
      envelope(Buffer.from('{"service"')),
    );
    expect(grpcStatusOf(json).code).toBe(Code.InvalidArgument);
    expectMessage(grpcStatusOf(json).message, 'JSON');
  });

  it('gRPC-Web over h2c and HTTP/1.1: status 3 in the trailer frame', async () => {
    for (const [post, url] of [
      [h2post, () => h2.url],
      [h1post, () => h1.url],
    ] as const) {
      const a = await post(url(), CHECK, { 'content-type': 'application/grpc-web+proto' }, envelope(TRUNCATED));
      const frame = lastFrame(a.body);
      expect(frame.flags).toBe(0x80);
      expect(frame.data).toMatch(/grpc-status: 3\r\n/);
      const message = decodeURIComponent(/grpc-message: (.*)\r\n/.exec(frame.data)![1]!);
      expectMessage(message, 'protobuf binary');
    }
  });

  it('Connect server-streaming: invalid_argument in the end-of-stream frame', async () => {
    const a = await h2post(h2.url, WATCH, { 'content-type': 'application/connect+proto' }, envelope(TRUNCATED));
    const frame = lastFrame(a.body);
    expect(frame.flags).toBe(0x02);
    const end = JSON.parse(frame.data) as { error: { code: string; message: string } };
    expect(end.error.code).toBe('invalid_argument');
    expectMessage(end.error.message, 'protobuf binary');
  });

  it('a bidi stream whose second message does not parse ends with INVALID_ARGUMENT', async () => {
    const good = envelope(
      toBinary(reflection.ServerReflectionRequestSchema, create(reflection.ServerReflectionRequestSchema, { host: 'a' })),
    );
    const a = await h2post(h2.url, REFLECT, { 'content-type': 'application/grpc', te: 'trailers' }, [good, envelope(TRUNCATED)]);
    expect(grpcStatusOf(a).code).toBe(Code.InvalidArgument);
    expect(grpcStatusOf(a).message).toMatch(/^request body is not a valid grpc\.reflection\.v1\.ServerReflectionRequest: /);
  });

  it("Connect clients see INVALID_ARGUMENT; valid requests and the service's own errors are untouched", async () => {
    for (const transport of [
      createGrpcTransport({ baseUrl: h2.url }),
      createConnectTransport({ baseUrl: h2.url, httpVersion: '2' }),
      createGrpcWebTransport({ baseUrl: h2.url, httpVersion: '2' }),
      createConnectTransport({ baseUrl: h1.url, httpVersion: '1.1' }),
    ]) {
      const client = createClient(health.Health, transport);
      expect((await client.check({})).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
      const own = ConnectError.from(await client.check({ service: 'upstream-broken' }).catch((e: unknown) => e));
      expect([own.code, own.rawMessage]).toEqual([Code.Internal, 'parse binary: premature EOF']);
    }
  });
});

describe('malformedRequestMessage', () => {
  it("words connect's binary and JSON parse errors and nothing else", () => {
    expect(malformedRequestMessage(Code.Internal, 'parse binary: premature EOF', 'a.B')).toBe(
      'request body is not a valid a.B: premature EOF (protobuf binary)',
    );
    expect(malformedRequestMessage(Code.InvalidArgument, 'cannot decode message a.B from JSON: Unexpected end of JSON input', 'a.B')).toBe(
      'request body is not a valid a.B: Unexpected end of JSON input (JSON)',
    );
    expect(malformedRequestMessage(Code.InvalidArgument, 'cannot decode field a.B.c from JSON: expected string, got 5', 'a.B')).toBe(
      'request body is not a valid a.B: cannot decode field a.B.c from JSON: expected string, got 5 (JSON)',
    );
    expect(malformedRequestMessage(Code.Internal, 'internal error', 'a.B')).toBeUndefined();
    expect(malformedRequestMessage(Code.InvalidArgument, 'cwd is required', 'a.B')).toBeUndefined();
    expect(malformedRequestMessage(Code.Unknown, 'parse binary: x', 'a.B')).toBeUndefined();
  });
});
