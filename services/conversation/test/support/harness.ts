/**
 * Starts the real conversation service against real Postgres and Redis, and lets a test play
 * the llm-gateway and the tool-runner by consuming their queues and answering on
 * conversation-events, exactly as those services do.
 */
import pg from 'pg';
import { Redis } from 'ioredis';
import { expect } from '@jest/globals';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationHistoryService,
  ConversationService,
  type LlmErrorEventSchema,
  LlmRequestJobSchema,
  type LlmResponseEventSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  StateKind,
  StopReason,
  type ToolCompleteEventSchema,
  ToolExecJobSchema,
  type CancelSignal,
  type ConversationEvent,
  type GetConversationResponse,
  type LlmRequestJob,
  type ToolExecJob,
  USER_HEADER,
} from '@bedrock/contracts';
import { STREAM_START, createRedisTransport, type Consumer, type Transport } from '@bedrock/platform';
import { createLogger, generateServiceCredentials, serviceTokenInterceptor, type ServiceCredentials } from '@bedrock/platform/server';
import type { ConfigOverrides } from '@bedrock/platform/config';
import { readConversationConfig, type ConversationConfig } from '../../src/config.ts';
import { createConversationService, type ConversationServiceInstance } from '../../src/create-conversation-service.ts';
import { createTestDatabase, type TestDatabase } from '@bedrock/testkit/database';
import { chainProblems, usage, type LlmJob } from './blocks.ts';

export type EventInit = MessageInitShape<typeof ConversationEventJobSchema>['event'];
type ResponseInit = Omit<MessageInitShape<typeof LlmResponseEventSchema>, '$typeName'>;
type ErrorInit = Omit<MessageInitShape<typeof LlmErrorEventSchema>, '$typeName'>;
type ToolCompleteInit = Omit<MessageInitShape<typeof ToolCompleteEventSchema>, '$typeName'>;

/** Core phase names (the `state_kind` column) by API state kind. */
const STATE_KINDS: Partial<Record<StateKind, string>> = {
  [StateKind.IDLE]: 'idle',
  [StateKind.LLM_REQUESTING]: 'llm_requesting',
  [StateKind.TOOL_EXECUTING]: 'tool_executing',
  [StateKind.CANCELLING]: 'cancelling',
  [StateKind.AWAITING_SUB_AGENTS]: 'awaiting_sub_agents',
  [StateKind.AWAITING_MODE_APPROVAL]: 'awaiting_mode_approval',
  [StateKind.AWAITING_CONTINUATION]: 'awaiting_continuation',
  [StateKind.CONTEXT_EXHAUSTED]: 'context_exhausted',
  [StateKind.ERROR]: 'error',
  [StateKind.COMPLETED]: 'completed',
  [StateKind.FAILED]: 'failed',
};

export const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

export interface ToolJobRecord {
  readonly queue: string;
  readonly job: ToolExecJob;
}

export interface Harness {
  readonly db: TestDatabase;
  readonly pool: pg.Pool;
  readonly transport: Transport;
  /** The primary replica (replaced by `restart()`). */
  readonly service: ConversationServiceInstance;
  readonly prefix: string;
  /** Service identity of this run: the service accepts every one of these tokens (web-bff's names users). */
  readonly services: ServiceCredentials;
  /** A client of the primary replica (or of `target`) acting as `user`, with web-bff's service token. */
  client(user?: string, target?: ConversationServiceInstance): Client<typeof ConversationService>;
  /** Jobs the "gateway" and "runner" received, in order (LLM jobs with the history they name, fetched as the gateway does). */
  readonly llmJobs: LlmJob[];
  readonly toolJobs: ToolExecJob[];
  /** The same tool jobs with the queue each came from. */
  readonly toolJobRecords: ToolJobRecord[];
  readonly cancels: CancelSignal[];
  /** Called for every LLM / tool job after it is recorded (an automatic gateway or runner). */
  onLlmJob: ((job: LlmJob) => Promise<void>) | null;
  onToolJob: ((job: ToolExecJob) => Promise<void>) | null;
  /** Sends a result event the way the gateway and runner do. */
  send(conversationId: string, eventId: string, event: EventInit): Promise<void>;
  /** Answers an LLM request (event id `r/<request id>` unless given). */
  respond(job: LlmRequestJob, value: Partial<ResponseInit>, eventId?: string): Promise<void>;
  /** Answers an LLM request with an error (event id `e/<request id>` unless given). */
  fail(job: LlmRequestJob, value: Partial<ErrorInit>, eventId?: string): Promise<void>;
  /** Answers a tool job (event id `t/<conversation>/<tool use id>` unless given). */
  complete(job: ToolExecJob, value: Partial<ToolCompleteInit>, eventId?: string): Promise<void>;
  /** The n-th (0-based) LLM request of a conversation, waiting for it. */
  llmJob(conversationId: string, index?: number): Promise<LlmJob>;
  /** The tool job for a tool_use id of a conversation, waiting for it. */
  toolJob(conversationId: string, toolUseId: string): Promise<ToolExecJob>;
  llmJobsOf(conversationId: string): LlmJob[];
  toolJobsOf(conversationId: string): ToolExecJob[];
  /** Creates a conversation through the API. */
  createConversation(user?: string, cwd?: string): Promise<string>;
  /** The conversation's state kind through the API. */
  stateOf(conversationId: string, user?: string): Promise<StateKind>;
  /** Waits until the conversation is in `kind` and its outbox is published (so its notifications can be read). */
  waitState(conversationId: string, kind: StateKind, user?: string, timeoutMs?: number): Promise<void>;
  /** Waits until the conversation service has finished with an event job (it was applied, or found to change nothing). */
  processed(eventId: string): Promise<void>;
  /** The conversation and its persisted messages through the API. */
  get(conversationId: string, user?: string): Promise<GetConversationResponse>;
  /** Every event of the conversation's notification stream, from the start. */
  notifications(conversationId: string): Promise<ConversationEvent[]>;
  /** Problems in the tool_use/tool_result chain of every LLM request received so far. */
  chainProblems(): string[];
  /** Waits until `predicate` holds, polling; throws with `what` after `timeoutMs`. */
  waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs?: number): Promise<T>;
  /** Starts another replica of the service on the same database and Redis. */
  startReplica(): Promise<ConversationServiceInstance>;
  /** Stops the primary replica (as a deploy would) and starts a new one on the same DB and Redis. */
  restart(): Promise<ConversationServiceInstance>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly label: string;
  /** Settings beyond the harness's own (typed; durations in ms); each section merges with the harness's. */
  readonly config?: ConfigOverrides<ConversationConfig>;
  /** Consume llm-requests and tool-exec in the test (default true). */
  readonly playWorkers?: boolean;
  /** Jobs the test gateway and runner take at once (default 8). */
  readonly workerConcurrency?: number;
  /** Postgres connections per replica (default 5). */
  readonly poolSize?: number;
  /** The clock of every replica (spend days, limit periods); default the system clock. */
  readonly clock?: () => Date;
}

/** The ConnectError of a rejected call, or a failure if the call succeeded. */
export async function rpcError(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    if (err instanceof ConnectError) return err;
    throw err;
  }
  throw new Error('expected the call to fail, but it succeeded');
}

export { Code };

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const db = await createTestDatabase(options.label);
  const prefix = `test-${options.label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const own: ConfigOverrides<ConversationConfig> = {
    log: { level: 'warn' },
    server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1', shutdownGrace: 2000 },
    database: { url: db.url },
    models: { default: 'test-model' },
    conversations: { sandbox: 'available' },
    // These tests drive the core through fake workers: a conversation's directory is only a name.
    workspaces: { hostPaths: 'on' },
    turns: { llmRetryBase: 50, cancelAckTimeout: 2000 },
    // The sweeper stays out of the way unless a test turns it on (recovery.test.ts).
    recovery: { interval: 3_600_000 },
  };
  // Tokens of the four services; the conversation service accepts them all as peers.
  const services = generateServiceCredentials(['web-bff', 'llm-gateway', 'tool-runner', 'conversation']);
  const config = readConversationConfig({}, mergeSections(own, options.config ?? {}));
  const deps = { servicePeers: services.peers, ...(options.clock ? { clock: options.clock } : {}) };
  const transports: Transport[] = [];
  const pools: pg.Pool[] = [];
  const replicas: ConversationServiceInstance[] = [];
  const newTransport = () => {
    const t = createRedisTransport({ redisUrl: REDIS_URL, prefix, onError: () => undefined });
    transports.push(t);
    return t;
  };
  const newPool = () => {
    const p = new pg.Pool({ connectionString: db.url, max: options.poolSize ?? 5 });
    pools.push(p);
    return p;
  };
  const logger = createLogger({ service: 'conversation-test', level: 'warn' });
  const startReplica = async (): Promise<ConversationServiceInstance> => {
    const replica = createConversationService(config, { ...deps, pool: newPool(), transport: newTransport(), logger });
    replicas.push(replica);
    await replica.start();
    return replica;
  };
  let primary = await startReplica();

  const workerTransport = newTransport();
  const llmJobs: LlmJob[] = [];
  const toolJobs: ToolExecJob[] = [];
  const seenJobs = new Set<string>();
  const toolJobRecords: ToolJobRecord[] = [];
  const cancels: CancelSignal[] = [];
  const consumers: Consumer[] = [];
  const concurrency = options.workerConcurrency ?? 8;
  const events = workerTransport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
  const httpClients: ReturnType<typeof createGrpcTransport>[] = [];

  const send = async (conversationId: string, eventId: string, event: EventInit) => {
    await events.add(eventId, create(ConversationEventJobSchema, { eventId, conversationId, event }));
  };
  const waitFor: Harness['waitFor'] = async (what, probe, timeoutMs = 10_000) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const value = await probe();
      if (value !== undefined && value !== false) return value as never;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  const clientFor = (user: string, target: ConversationServiceInstance) => {
    const t = createGrpcTransport({
      baseUrl: target.grpcUrl,
      // As web-bff calls: its service credential, and with it the user.
      interceptors: [
        serviceTokenInterceptor(services.tokens['web-bff']!),
        (next) => (req) => {
          req.header.set(USER_HEADER, user);
          return next(req);
        },
      ],
    });
    httpClients.push(t);
    return createClient(ConversationService, t);
  };

  // The played gateway fetches each job's history from the service as llm-gateway does
  // (claim-check jobs), from whichever replica is primary; a restart in between is waited out.
  const historyClients = new Map<string, Client<typeof ConversationHistoryService>>();
  const historyOf = async (job: LlmRequestJob): Promise<LlmJob> => {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const url = primary.grpcUrl;
      let client = historyClients.get(url);
      if (!client) {
        const t = createGrpcTransport({ baseUrl: url, interceptors: [serviceTokenInterceptor(services.tokens['llm-gateway']!)] });
        httpClients.push(t);
        client = createClient(ConversationHistoryService, t);
        historyClients.set(url, client);
      }
      try {
        const res = await client.getLlmHistory({
          conversationId: job.conversationId,
          historyThrough: job.historyThrough,
          continuationPrompt: job.continuationPrompt,
        });
        return Object.assign(job, { messages: res.messages });
      } catch (err) {
        if (ConnectError.from(err).code !== Code.Unavailable || Date.now() > deadline) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  };

  const h: Harness = {
    db,
    pool: pools[0]!,
    transport: workerTransport,
    get service() {
      return primary;
    },
    prefix,
    services,
    llmJobs,
    toolJobs,
    toolJobRecords,
    cancels,
    onLlmJob: null,
    onToolJob: null,
    client(user = 'alice', target = primary) {
      return clientFor(user, target);
    },
    send,
    async respond(job, value, eventId = `r/${job.requestId}`) {
      await send(job.conversationId, eventId, {
        case: 'llmResponse',
        value: { requestId: job.requestId, stopReason: StopReason.END_TURN, usage: usage(), content: [], ...value },
      });
    },
    async fail(job, value, eventId = `e/${job.requestId}`) {
      await send(job.conversationId, eventId, { case: 'llmError', value: { requestId: job.requestId, message: 'failed', ...value } });
    },
    async complete(job, value, eventId = `t/${job.conversationId}/${job.toolUseId}`) {
      await send(job.conversationId, eventId, { case: 'toolComplete', value: { toolUseId: job.toolUseId, content: 'ok', ...value } });
    },
    llmJobsOf: (id) => llmJobs.filter((j) => j.conversationId === id),
    toolJobsOf: (id) => toolJobs.filter((j) => j.conversationId === id),
    llmJob(id, index = 0) {
      return waitFor(`LLM request #${index + 1} of ${id}`, () => llmJobs.filter((j) => j.conversationId === id)[index]);
    },
    toolJob(id, toolUseId) {
      return waitFor(`tool job ${toolUseId} of ${id}`, () => toolJobs.find((j) => j.conversationId === id && j.toolUseId === toolUseId));
    },
    async createConversation(user = 'alice', cwd = '/tmp') {
      const res = await h.client(user).createConversation({ cwd });
      return res.conversation!.id;
    },
    async stateOf(id, user = 'alice') {
      return (await h.client(user).getConversation({ conversationId: id })).conversation!.state!.kind;
    },
    async waitState(id, kind, user = 'alice', timeoutMs = 10_000) {
      // Polls the row (one cheap query), then confirms through the API as `user`.
      const want = STATE_KINDS[kind];
      let last: string | undefined;
      try {
        await waitFor(
          `state ${StateKind[kind]} of ${id}`,
          async () => {
            const { rows } = await h.pool.query<{ state_kind: string }>('SELECT state_kind FROM conversations WHERE id = $1', [id]);
            last = rows[0]?.state_kind;
            return last === want;
          },
          timeoutMs,
        );
      } catch (err) {
        throw new Error(`${(err as Error).message} (last seen ${last ?? 'nothing'})`);
      }
      expect(await h.stateOf(id, user)).toBe(kind);
      // And its effects are out (notifications included), so the test may read them.
      await waitFor(`outbox of ${id} published`, async () => {
        const { rows } = await h.pool.query('SELECT 1 FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL LIMIT 1', [id]);
        return rows.length === 0;
      });
    },
    async processed(eventId) {
      await waitFor(`event ${eventId} processed`, async () => {
        const status = await workerTransport.queues.jobStatus(QUEUE_CONVERSATION_EVENTS, eventId);
        if (status.state === 'failed') throw new Error(`event ${eventId} failed`);
        return status.state === 'completed';
      });
    },
    get(id, user = 'alice') {
      return h.client(user).getConversation({ conversationId: id });
    },
    async notifications(id) {
      const out: ConversationEvent[] = [];
      let after = STREAM_START;
      for (;;) {
        const batch = await workerTransport.streams.read(id, after, { limit: 1000 });
        if (batch.length === 0) return out;
        out.push(...batch);
        const last = batch[batch.length - 1]!;
        after = { sequence: last.sequence, deltaIndex: last.deltaIndex };
      }
    },
    chainProblems: () => llmJobs.flatMap(chainProblems),
    waitFor,
    startReplica,
    async restart() {
      await primary.stop();
      primary = await startReplica();
      return primary;
    },
    async close() {
      await unsubscribe();
      await Promise.all(consumers.map((c) => c.close(0)));
      for (const r of replicas) await r.stop().catch(() => undefined);
      for (const t of transports) await t.close();
      for (const p of pools) await p.end().catch(() => undefined);
      await deleteRedisKeys(prefix);
      await db.drop();
    },
  };

  if (options.playWorkers !== false) {
    consumers.push(
      workerTransport.queues.consume(
        QUEUE_LLM_REQUESTS,
        LlmRequestJobSchema,
        async (job) => {
          // Delivery is at least once: a job redelivered after a stall (a busy test machine can
          // miss a lock renewal) is one job, handled once, as an idempotent worker would.
          if (seenJobs.has(job.id)) return;
          const resolved = await historyOf(job.data);
          if (seenJobs.has(job.id)) return;
          seenJobs.add(job.id);
          llmJobs.push(resolved);
          await h.onLlmJob?.(resolved);
        },
        { concurrency },
      ),
    );
    for (const queue of [QUEUE_TOOL_EXEC, QUEUE_TOOL_EXEC_RESTRICTED]) {
      consumers.push(
        workerTransport.queues.consume(
          queue,
          ToolExecJobSchema,
          async (job) => {
            if (seenJobs.has(`${queue}/${job.id}`)) return;
            seenJobs.add(`${queue}/${job.id}`);
            toolJobs.push(job.data);
            toolJobRecords.push({ queue, job: job.data });
            await h.onToolJob?.(job.data);
          },
          { concurrency },
        ),
      );
    }
  }
  const unsubscribe = await workerTransport.cancels.subscribe((signal) => void cancels.push(signal));
  return h;
}

/** `base` with `extra`'s settings laid over it, section by section. */
function mergeSections<T extends object>(base: T, extra: T): T {
  const out: Record<string, unknown> = { ...(base as Record<string, unknown>) };
  for (const [key, value] of Object.entries(extra)) {
    const prior = out[key];
    out[key] = prior && value && typeof prior === 'object' && typeof value === 'object' ? { ...prior, ...value } : value;
  }
  return out as T;
}

/** Deletes every Redis key of a test's prefix (queues, streams, registry). */
export async function deleteRedisKeys(prefix: string): Promise<void> {
  const redis = new Redis(REDIS_URL);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000);
      if (keys.length > 0) await redis.del(...keys);
      cursor = next;
    } while (cursor !== '0');
  } finally {
    await redis.quit();
  }
}

export { CancelSignalSchema };
