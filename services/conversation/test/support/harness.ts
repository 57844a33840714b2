/**
 * Starts the real conversation service against real Postgres and Redis, and lets a test play
 * the llm-gateway and the tool-runner by consuming their queues and answering on
 * conversation-events, exactly as those services do.
 */
import pg from 'pg';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationService,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  ToolExecJobSchema,
  type CancelSignal,
  type LlmRequestJob,
  type ToolExecJob,
} from '@bedrock/contracts';
import { createRedisTransport, type Consumer, type Transport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { readConversationConfig } from '../../src/config.ts';
import { startConversationService, type RunningConversationService } from '../../src/create-conversation-service.ts';
import { USER_HEADER } from '../../src/api/conversation-api.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';

export type EventInit = MessageInitShape<typeof ConversationEventJobSchema>['event'];

export interface Harness {
  readonly db: TestDatabase;
  readonly pool: pg.Pool;
  readonly transport: Transport;
  readonly service: RunningConversationService;
  readonly prefix: string;
  client(user?: string): Client<typeof ConversationService>;
  /** Jobs the "gateway" and "runner" received, in order. */
  readonly llmJobs: LlmRequestJob[];
  readonly toolJobs: ToolExecJob[];
  readonly cancels: CancelSignal[];
  /** Sends a result event the way the gateway and runner do. */
  send(conversationId: string, eventId: string, event: EventInit): Promise<void>;
  /** Waits until `predicate` holds, polling; throws with `what` after `timeoutMs`. */
  waitFor<T>(what: string, probe: () => T | undefined | false | Promise<T | undefined | false>, timeoutMs?: number): Promise<T>;
  /** Starts another replica of the service on the same database and Redis. */
  startReplica(): Promise<RunningConversationService>;
  close(): Promise<void>;
}

export interface HarnessOptions {
  readonly label: string;
  readonly env?: Record<string, string>;
  /** Consume llm-requests and tool-exec in the test (default true). */
  readonly playWorkers?: boolean;
}

export async function startHarness(options: HarnessOptions): Promise<Harness> {
  const db = await createTestDatabase(options.label);
  const prefix = `test-${options.label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const env = {
    DATABASE_URL: db.url,
    BEDROCK_GRPC_PORT: '0',
    BEDROCK_METRICS_PORT: '0',
    BEDROCK_HOST: '127.0.0.1',
    BEDROCK_SANDBOX: 'available',
    BEDROCK_DEFAULT_MODEL: 'test-model',
    BEDROCK_LLM_RETRY_BASE: '50',
    BEDROCK_CANCEL_ACK_TIMEOUT: '2000',
    BEDROCK_RECOVERY_INTERVAL: '3600000',
    BEDROCK_SHUTDOWN_GRACE: '2000',
    LOG_LEVEL: 'warn',
    ...options.env,
  };
  const config = readConversationConfig(env);
  const transports: Transport[] = [];
  const pools: pg.Pool[] = [];
  const replicas: RunningConversationService[] = [];
  const newTransport = () => {
    const t = createRedisTransport({ redisUrl: 'redis://127.0.0.1:6379', prefix, onError: () => undefined });
    transports.push(t);
    return t;
  };
  const newPool = () => {
    const p = new pg.Pool({ connectionString: db.url, max: 5 });
    pools.push(p);
    return p;
  };
  const logger = createLogger({ service: 'conversation-test', level: 'warn' });
  const service = await startConversationService(config, { pool: newPool(), transport: newTransport(), logger });
  replicas.push(service);

  const workerTransport = newTransport();
  const llmJobs: LlmRequestJob[] = [];
  const toolJobs: ToolExecJob[] = [];
  const cancels: CancelSignal[] = [];
  const consumers: Consumer[] = [];
  if (options.playWorkers !== false) {
    consumers.push(workerTransport.queues.consume(QUEUE_LLM_REQUESTS, LlmRequestJobSchema, async (job) => void llmJobs.push(job.data)));
    for (const q of [QUEUE_TOOL_EXEC, QUEUE_TOOL_EXEC_RESTRICTED]) {
      consumers.push(workerTransport.queues.consume(q, ToolExecJobSchema, async (job) => void toolJobs.push(job.data)));
    }
  }
  const unsubscribe = await workerTransport.cancels.subscribe((signal) => void cancels.push(signal));
  const events = workerTransport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
  const httpClients: ReturnType<typeof createGrpcTransport>[] = [];

  return {
    db,
    pool: pools[0]!,
    transport: workerTransport,
    service,
    prefix,
    llmJobs,
    toolJobs,
    cancels,
    client(user = 'alice') {
      const t = createGrpcTransport({
        baseUrl: service.grpcUrl,
        interceptors: [(next) => (req) => { req.header.set(USER_HEADER, user); return next(req); }],
      });
      httpClients.push(t);
      return createClient(ConversationService, t);
    },
    async send(conversationId, eventId, event) {
      await events.add(eventId, create(ConversationEventJobSchema, { eventId, conversationId, event }));
    },
    async waitFor(what, probe, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const value = await probe();
        if (value !== undefined && value !== false) return value as never;
        if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    async startReplica() {
      const replica = await startConversationService(config, { pool: newPool(), transport: newTransport(), logger });
      replicas.push(replica);
      return replica;
    },
    async close() {
      await unsubscribe();
      await Promise.all(consumers.map((c) => c.close(0)));
      for (const r of replicas) await r.stop().catch(() => undefined);
      for (const t of transports) await t.close();
      for (const p of pools) await p.end();
      await db.drop();
    },
  };
}

export { CancelSignalSchema };
