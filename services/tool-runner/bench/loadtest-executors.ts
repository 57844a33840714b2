/**
 * The load test's two ways to a runner (bench/loadtest.ts): gRPC ExecuteTool with a service
 * token, or ToolExecJobs on the tool-exec queues with results read from conversation-events.
 */
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  ConversationEventJobSchema,
  Mode,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  ToolExecJobSchema,
  ToolRunnerService,
  toolExecJobId,
} from '@bedrock/contracts';
import type { RunnerCapabilities, ToolCompleteEvent, ToolExecJob } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import type { Transport } from '@bedrock/platform';
import { serviceTokenInterceptor } from '@bedrock/platform/server';

/** Says why the load test cannot go on, cleans up and exits. */
export type Unusable = (message: string) => Promise<never>;

export interface Executor {
  execute(job: ToolExecJob): Promise<ToolCompleteEvent>;
  close(): Promise<void>;
  readonly describe: string;
  readonly capabilities?: RunnerCapabilities;
}

/** A transport failure of one request, by kind (low cardinality, for the error table). */
export class RequestError extends Error {
  constructor(
    readonly kind: string,
    message: string,
  ) {
    super(message);
  }
}

export async function grpcExecutor(target: string, token: string, tokenSource: string, unusable: Unusable): Promise<Executor> {
  const client = createClient(ToolRunnerService, createGrpcTransport({ baseUrl: target, interceptors: [serviceTokenInterceptor(token)] }));
  let capabilities: RunnerCapabilities | undefined;
  try {
    ({ capabilities } = await client.getCapabilities({}, { timeoutMs: 5000 }));
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated) {
      return unusable(
        `the runner at ${target} refused the service token in ${tokenSource}: list its SHA-256 in the runner's BEDROCK_SERVICE_PEERS_FILE (npx bedrock token hash "$(cat ${tokenSource})") and restart it`,
      );
    }
    if (e.code === Code.Unavailable || e.code === Code.DeadlineExceeded) {
      return unusable(
        `no tool-runner answers at ${target} (${e.rawMessage}); run without --url to start one here, or start one: BEDROCK_SERVICE_PEERS_FILE=... npx tsx services/tool-runner/src/main.ts`,
      );
    }
    return unusable(`GetCapabilities on ${target} failed: ${Code[e.code]}: ${e.rawMessage}`);
  }
  return {
    capabilities,
    describe: `gRPC ExecuteTool on ${target}`,
    async execute(job) {
      try {
        for await (const msg of client.executeTool({ job }, { timeoutMs: 120_000 })) {
          if (msg.kind.case === 'result') return msg.kind.value;
        }
      } catch (err) {
        const e = ConnectError.from(err);
        throw new RequestError(`grpc ${Code[e.code]}`, e.rawMessage);
      }
      throw new RequestError('grpc stream ended without a result', 'stream ended without a result');
    },
    async close() {},
  };
}

/** Transport whose Redis answers within `ms`, or a one-line exit. */
export async function reachRedis(redisUrl: string, prefix: string, unusable: Unusable, ms = 3000): Promise<Transport> {
  const transport = createRedisTransport({ redisUrl, prefix, onError: () => {} });
  // ping fails at once until the connection is ready: ask again until it answers or the time is up.
  const deadline = Date.now() + ms;
  let answered = false;
  while (!answered && Date.now() < deadline) {
    answered = await transport.ping!().then(
      () => true,
      () => false,
    );
    if (!answered) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  if (!answered) {
    void transport.close().catch(() => {});
    return unusable(`Redis does not answer at ${redisUrl} (within ${ms / 1000} s): the queue path needs it`);
  }
  return transport;
}

export async function queueExecutor(
  transport: Transport,
  prefix: string,
  run: { readonly mode: Mode; readonly redisUrl: string },
  unusable: Unusable,
): Promise<Executor> {
  const { mode } = run;
  const runners = await transport.runners.list();
  if (runners.length === 0) {
    await transport.close();
    return unusable(
      `no tool-runner registered under Redis prefix "${prefix}": start one with BEDROCK_REDIS_PREFIX=${prefix}, or leave out --redis-prefix to start one here`,
    );
  }
  const queue = mode === Mode.RESTRICTED ? QUEUE_TOOL_EXEC_RESTRICTED : QUEUE_TOOL_EXEC;
  if (!runners.some((r) => r.queues.includes(queue))) {
    await transport.close();
    return unusable(`no runner under prefix "${prefix}" consumes ${queue}${mode === Mode.RESTRICTED ? ' (no kernel sandbox there)' : ''}`);
  }
  const producer = transport.queues.producer(queue, ToolExecJobSchema);
  const waiting = new Map<string, (r: ToolCompleteEvent) => void>();
  // As the conversation service does: tool results arrive as toolComplete events on conversation-events.
  const consumer = transport.queues.consume(
    QUEUE_CONVERSATION_EVENTS,
    ConversationEventJobSchema,
    async (job) => {
      if (job.data.event.case !== 'toolComplete') return;
      waiting.get(job.data.event.value.toolUseId)?.(job.data.event.value);
    },
    { concurrency: 64 },
  );
  return {
    capabilities: runners.find((r) => r.queues.includes(queue)),
    describe: `queue ${queue} → ${QUEUE_CONVERSATION_EVENTS} on ${run.redisUrl} prefix "${prefix}" (${runners.length} runner(s) registered)`,
    async execute(job) {
      const result = new Promise<ToolCompleteEvent>((resolve, reject) => {
        const timer = setTimeout(() => {
          waiting.delete(job.toolUseId);
          reject(new RequestError('queue: no result within 120 s', 'no result within 120 s'));
        }, 120_000);
        waiting.set(job.toolUseId, (r) => {
          clearTimeout(timer);
          waiting.delete(job.toolUseId);
          resolve(r);
        });
      });
      try {
        await producer.add(toolExecJobId(job.conversationId, job.toolUseId), job);
      } catch (err) {
        waiting.delete(job.toolUseId);
        throw new RequestError('queue: enqueue failed', (err as Error).message);
      }
      return result;
    },
    async close() {
      await consumer.close(0);
      await transport.close();
    },
  };
}
