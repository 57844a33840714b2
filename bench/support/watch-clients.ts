/**
 * The watchers of the watcher benchmark (bench/watchers.bench.ts), in their own process so that
 * their CPU does not count against web-bff: opens BENCH_WATCHERS WatchConversation streams over
 * BENCH_CONNECTIONS HTTP/2 connections, prints `ready` once every snapshot arrived, then records
 * for every token delta the delay from the timestamp in its text (`<phase>:<ms>`, when the
 * publisher appended it) to its arrival. On `report` (stdin) prints every phase's figures as JSON.
 */
import { setMaxListeners } from 'node:events';
import http2 from 'node:http2';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  ConversationService,
  WatchConversationRequestSchema,
  WatchConversationResponseSchema,
  type ConversationEvent,
} from '@bedrock/contracts';

const url = process.env.BENCH_URL!;
const token = process.env.BENCH_TOKEN!;
const ids = JSON.parse(process.env.BENCH_CONVERSATIONS!) as string[];
const watchers = Number(process.env.BENCH_WATCHERS);
const connections = Number(process.env.BENCH_CONNECTIONS);
const now = () => performance.timeOrigin + performance.now();

const auth: Interceptor = (next) => (req) => {
  req.header.set('authorization', `Bearer ${token}`);
  return next(req);
};
/**
 * BENCH_CLIENT=raw (default): a minimal gRPC client on node:http2 (`rawWatcher`: frames parsed by
 * hand, messages decoded with protobuf-es), so that the load generator, which shares the machine
 * with web-bff, is not what limits the figures (connect-node's client costs: docs/testing.md).
 * BENCH_CLIENT=connect: connect-node's gRPC client, as before.
 */
const raw = (process.env.BENCH_CLIENT ?? 'raw') === 'raw';
const clients = raw
  ? []
  : Array.from({ length: connections }, () =>
      createClient(ConversationService, createGrpcTransport({ baseUrl: url, interceptors: [auth] })),
    );
const sessions = raw ? Array.from({ length: connections }, () => http2.connect(url, { settings: { initialWindowSize: 1 << 20 } })) : [];
const WATCH_PATH = `/${ConversationService.typeName}/${ConversationService.method.watchConversation.name}`;
interface Phase {
  readonly delays: number[];
  /** Per event (conversation/delta index): deliveries and the latest arrival delay. */
  readonly perEvent: Map<string, { count: number; max: number }>;
}
const phases = new Map<string, Phase>();
let errors = 0;
const abort = new AbortController();
setMaxListeners(0, abort.signal);

function onEvent(id: string, e: ConversationEvent, ready: () => void): void {
  if (e.kind.case === 'snapshot') ready();
  else if (e.kind.case === 'tokenDelta') {
    const text = e.kind.value.text;
    const colon = text.indexOf(':');
    const name = text.slice(0, colon);
    let phase = phases.get(name);
    if (!phase) phases.set(name, (phase = { delays: [], perEvent: new Map() }));
    const { delays, perEvent } = phase;
    const delay = now() - Number(text.slice(colon + 1));
    delays.push(delay);
    const key = `${id}/${e.sequence}/${e.deltaIndex}`;
    const entry = perEvent.get(key);
    if (entry) {
      entry.count++;
      entry.max = Math.max(entry.max, delay);
    } else perEvent.set(key, { count: 1, max: delay });
  }
}

async function watcher(i: number, ready: () => void): Promise<void> {
  const id = ids[i % ids.length]!;
  if (raw) return rawWatcher(id, sessions[i % connections]!, ready);
  try {
    for await (const res of clients[i % connections]!.watchConversation({ conversationId: id }, { signal: abort.signal }))
      onEvent(id, res.event!, ready);
  } catch {
    if (!abort.signal.aborted) errors++;
  }
}

/** One WatchConversation call as gRPC over HTTP/2 by hand: one request frame, then length-prefixed responses. */
function rawWatcher(id: string, session: http2.ClientHttp2Session, ready: () => void): Promise<void> {
  const body = toBinary(WatchConversationRequestSchema, create(WatchConversationRequestSchema, { conversationId: id }));
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  frame.set(body, 5);
  const stream = session.request({
    ':method': 'POST',
    ':path': WATCH_PATH,
    'content-type': 'application/grpc+proto',
    te: 'trailers',
    authorization: `Bearer ${token}`,
  });
  stream.end(frame);
  let pending: Buffer | undefined;
  stream.on('data', (chunk: Buffer) => {
    let buf = pending ? Buffer.concat([pending, chunk]) : chunk;
    while (buf.length >= 5) {
      const length = buf.readUInt32BE(1);
      if (buf.length < 5 + length) break;
      onEvent(id, fromBinary(WatchConversationResponseSchema, buf.subarray(5, 5 + length)).event!, ready);
      buf = buf.subarray(5 + length);
    }
    pending = buf.length > 0 ? buf : undefined;
  });
  return new Promise((resolve) => {
    stream.on('error', () => undefined);
    stream.once('close', () => {
      if (!abort.signal.aborted) errors++;
      resolve();
    });
  });
}

const started = now();
const BATCH = 500;
for (let i = 0; i < watchers; i += BATCH) {
  const n = Math.min(BATCH, watchers - i);
  await new Promise<void>((resolve) => {
    let left = n;
    for (let j = 0; j < n; j++) void watcher(i + j, () => --left === 0 && resolve());
  });
}
process.stdout.write(`${JSON.stringify({ ready: true, setupMs: now() - started, errors })}\n`);

process.stdin.setEncoding('utf8');
process.stdin.on('data', (line: string) => {
  if (!line.includes('report')) return;
  const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
  const report: Record<string, unknown> = {};
  for (const [name, { delays, perEvent }] of phases) {
    const sorted = [...delays].sort((a, b) => a - b);
    const maxes = [...perEvent.values()].map((e) => e.max).sort((a, b) => a - b);
    const complete = [...perEvent.values()].filter((e) => e.count === watchers / ids.length).length;
    report[name] = {
      deliveries: delays.length,
      events: perEvent.size,
      eventsReachingEveryWatcher: complete,
      deliveryP50: pct(sorted, 50),
      deliveryP99: pct(sorted, 99),
      deliveryMax: sorted.at(-1),
      everyWatcherP50: pct(maxes, 50),
      everyWatcherP99: pct(maxes, 99),
    };
  }
  process.stdout.write(`${JSON.stringify({ phases: report, errors, cpu: process.cpuUsage() })}\n`);
  abort.abort();
  for (const session of sessions) session.destroy();
  setTimeout(() => process.exit(0), 200);
});
