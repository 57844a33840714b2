/**
 * The watchers of the watcher benchmark, in their own process so that their CPU does not
 * count against web-bff: opens `BENCH_WATCHERS` WatchConversation streams over
 * `BENCH_CONNECTIONS` HTTP/2 connections, prints `ready` once every snapshot arrived, then
 * records for every token delta the delay from the timestamp in its text (when the
 * publisher appended it) to its arrival. On `report` (stdin) prints the figures as JSON.
 */
import { setMaxListeners } from 'node:events';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';

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
const clients = Array.from({ length: connections }, () => createClient(ConversationService, createGrpcTransport({ baseUrl: url, interceptors: [auth] })));
const delays: number[] = [];
/** Per event (conversation/delta index): deliveries and the latest arrival delay. */
const perEvent = new Map<string, { count: number; max: number }>();
let errors = 0;
const abort = new AbortController();
setMaxListeners(0, abort.signal);

async function watcher(i: number, ready: () => void): Promise<void> {
  const id = ids[i % ids.length]!;
  try {
    for await (const res of clients[i % connections]!.watchConversation({ conversationId: id }, { signal: abort.signal })) {
      const e = res.event!;
      if (e.kind.case === 'snapshot') ready();
      else if (e.kind.case === 'tokenDelta') {
        const delay = now() - Number(e.kind.value.text);
        delays.push(delay);
        const key = `${id}/${e.sequence}/${e.deltaIndex}`;
        const entry = perEvent.get(key);
        if (entry) {
          entry.count++;
          entry.max = Math.max(entry.max, delay);
        } else perEvent.set(key, { count: 1, max: delay });
      }
    }
  } catch {
    if (!abort.signal.aborted) errors++;
  }
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
  const sorted = [...delays].sort((a, b) => a - b);
  const maxes = [...perEvent.values()].map((e) => e.max).sort((a, b) => a - b);
  const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;
  const complete = [...perEvent.values()].filter((e) => e.count === watchers / ids.length).length;
  process.stdout.write(
    `${JSON.stringify({
      deliveries: delays.length,
      events: perEvent.size,
      eventsReachingEveryWatcher: complete,
      deliveryP50: pct(sorted, 50),
      deliveryP99: pct(sorted, 99),
      deliveryMax: sorted.at(-1),
      everyWatcherP50: pct(maxes, 50),
      everyWatcherP99: pct(maxes, 99),
      errors,
    })}\n`,
  );
  abort.abort();
  setTimeout(() => process.exit(0), 200);
});
