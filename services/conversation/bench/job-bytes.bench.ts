/**
 * `make bench BENCH=job-bytes` (issue 14 item 4): the bytes of the LLM request job (a claim
 * check) and of every outbox row a turn writes must stay flat as one conversation grows to 200
 * turns, beside what the job would weigh had it copied the history. Real service, Postgres and
 * Redis; the bench plays the gateway (takes each job, fetches its history, answers). Prints
 * figures and ratios; asserts nothing. docs/conversation.md, "LLM request jobs: claim checks".
 */
import pg from 'pg';
import { create, toBinary, toJsonString } from '@bufbuild/protobuf';
import { createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  ConversationEventJobSchema,
  ConversationHistoryService,
  ConversationService,
  GetLlmHistoryResponseSchema,
  LlmMessageSchema,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  StopReason,
  type LlmRequestJob,
  USER_HEADER,
} from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import { createLogger, generateServiceCredentials, serviceTokenInterceptor } from '@bedrock/platform/server';
import { createTestDatabase } from '@bedrock/testkit/database';
import { readConversationConfig } from '../src/config.ts';
import { createConversationService } from '../src/create-conversation-service.ts';

const TURNS = Number(process.env.BENCH_TURNS ?? 200);
/** The turns whose figures are printed, side by side. */
const REPORT_AT = [1, 50, 100, 200].filter((t) => t <= TURNS);
const USER_TEXT = 'Please look at the next part of the repository and tell me what it does. '.repeat(3);
const ANSWER_TEXT = 'Here is what that part does, in a few sentences of realistic length for an agent answer. '.repeat(5);

/**
 * One turn's figures: the job, the turn's outbox rows, the job had it copied the history, and the
 * history the gateway fetches instead (response bytes, and the fetch's wall time).
 */
interface TurnFigures {
  turn: number;
  jobProto: number;
  jobRowJson: number;
  outboxTurn: number;
  outboxRows: number;
  copyProto: number;
  copyJson: number;
  historyBytes: number;
  historyMessages: number;
  fetchMs: number;
}

/** Bytes of a length-delimited field: tag, length varint, payload. */
const fieldBytes = (len: number) => 1 + Math.max(1, Math.ceil(Math.log2(len + 1) / 7)) + len;

async function main(): Promise<void> {
  const db = await createTestDatabase('jobbytes');
  const prefix = `bench-jobbytes-${process.pid}`;
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
  const transport = createRedisTransport({ redisUrl, prefix, onError: () => undefined });
  const workers = createRedisTransport({ redisUrl, prefix, onError: () => undefined });
  const pool = new pg.Pool({ connectionString: db.url, max: 4 });
  const services = generateServiceCredentials(['web-bff', 'llm-gateway']);
  const config = readConversationConfig(
    {},
    {
      log: { level: 'error' },
      server: { grpcPort: 0, metricsPort: 0, host: '127.0.0.1' },
      database: { url: db.url },
      models: { default: 'bench-model' },
      conversations: { sandbox: 'unavailable' },
      recovery: { interval: 3_600_000 },
    },
  );
  const service = createConversationService(config, {
    transport,
    logger: createLogger({ service: 'bench', level: 'error' }),
    servicePeers: services.peers,
  });
  await service.start();
  const api = createClient(
    ConversationService,
    createGrpcTransport({
      baseUrl: service.grpcUrl,
      interceptors: [
        serviceTokenInterceptor(services.tokens['web-bff']!),
        (next) => (req) => (req.header.set(USER_HEADER, 'bench'), next(req)),
      ],
    }),
  );
  const history = createClient(
    ConversationHistoryService,
    createGrpcTransport({ baseUrl: service.grpcUrl, interceptors: [serviceTokenInterceptor(services.tokens['llm-gateway']!)] }),
  );
  const events = workers.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema);
  let waiting: ((job: LlmRequestJob) => void) | undefined;
  const consumer = workers.queues.consume(QUEUE_LLM_REQUESTS, LlmRequestJobSchema, async (job) => waiting?.(job.data));
  const nextJob = () => new Promise<LlmRequestJob>((resolve) => (waiting = resolve));

  const figures: TurnFigures[] = [];
  try {
    const { conversation } = await api.createConversation({ cwd: '/tmp' });
    const id = conversation!.id;
    const idle = async () => {
      for (;;) {
        const { rows } = await pool.query<{ idle: boolean; unsent: boolean }>(
          `SELECT state_kind = 'idle' AS idle, EXISTS (SELECT 1 FROM outbox WHERE conversation_id = $1 AND sent_at IS NULL) AS unsent FROM conversations WHERE id = $1`,
          [id],
        );
        if (rows[0]?.idle && !rows[0].unsent) return;
        await new Promise((r) => setTimeout(r, 2));
      }
    };
    const started = performance.now();
    for (let turn = 1; turn <= TURNS; turn++) {
      const { rows: mark } = await pool.query<{ id: string }>('SELECT COALESCE(max(id), 0) AS id FROM outbox');
      const job = nextJob();
      await api.sendMessage({ conversationId: id, text: `${turn}: ${USER_TEXT}` });
      const got = await job;
      // As the gateway: fetch the history the job names.
      const t0 = performance.now();
      const fetched = await history.getLlmHistory({
        conversationId: id,
        historyThrough: got.historyThrough,
        continuationPrompt: got.continuationPrompt,
      });
      const fetchMs = performance.now() - t0;
      await events.add(
        `r/${got.requestId}`,
        create(ConversationEventJobSchema, {
          eventId: `r/${got.requestId}`,
          conversationId: id,
          event: {
            case: 'llmResponse',
            value: {
              requestId: got.requestId,
              stopReason: StopReason.END_TURN,
              usage: { inputTokens: 1000n, outputTokens: 100n },
              content: [{ block: { case: 'text', value: { text: `${turn}: ${ANSWER_TEXT}` } } }],
            },
          },
        }),
      );
      await idle();
      if (!REPORT_AT.includes(turn)) continue;
      const { rows } = await pool.query<{ kind: string; queue: string | null; bytes: number }>(
        `SELECT kind, payload->>'queue' AS queue, octet_length(payload::text) AS bytes FROM outbox_effects WHERE conversation_id = $1 AND id > $2 ORDER BY id, n`,
        [id, mark[0]!.id],
      );
      const jobProto = toBinary(LlmRequestJobSchema, got).length;
      const jobRowJson = rows.find((r) => r.queue === QUEUE_LLM_REQUESTS)?.bytes ?? NaN;
      // Before claim checks the job carried the history as field 6 (repeated LlmMessage). The
      // JSON figure is a lower bound: jsonb's text adds a space after every colon and comma.
      const historyProto = fetched.messages.reduce((n, m) => n + fieldBytes(toBinary(LlmMessageSchema, m).length), 0);
      const historyJson = `,"messages":[${fetched.messages.map((m) => toJsonString(LlmMessageSchema, m)).join(',')}]`.length;
      figures.push({
        turn,
        jobProto,
        jobRowJson,
        outboxTurn: rows.reduce((n, r) => n + r.bytes, 0),
        outboxRows: rows.length,
        copyProto: jobProto + historyProto,
        copyJson: jobRowJson + historyJson,
        historyBytes: toBinary(GetLlmHistoryResponseSchema, fetched).length,
        historyMessages: fetched.messages.length,
        fetchMs,
      });
    }
    const elapsed = performance.now() - started;

    const first = figures[0]!;
    const last = figures[figures.length - 1]!;
    const kib = (n: number) => (n >= 10_240 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);
    console.log(
      `One conversation, ${TURNS} turns (user ${USER_TEXT.length + 5} chars, answer ${ANSWER_TEXT.length + 5} chars per turn), ${(elapsed / TURNS).toFixed(1)} ms per turn.`,
    );
    console.log('');
    console.log(
      'turn | LLM job (Redis, protobuf) | LLM job outbox row (JSON) | outbox bytes written this turn (rows) | job if it copied the history: protobuf / JSON | outbox bytes this turn if it did | history fetched by the gateway (messages, one fetch)',
    );
    console.log('---: | ---: | ---: | ---: | ---: | ---: | ---:');
    for (const f of figures) {
      console.log(
        `${f.turn} | ${kib(f.jobProto)} | ${kib(f.jobRowJson)} | ${kib(f.outboxTurn)} (${f.outboxRows}) | ${kib(f.copyProto)} / ${kib(f.copyJson)} | ${kib(f.outboxTurn - f.jobRowJson + f.copyJson)} | ${kib(f.historyBytes)} (${f.historyMessages}, ${f.fetchMs.toFixed(1)} ms)`,
      );
    }
    console.log('');
    const ratio = (a: number, b: number) => (a / b).toFixed(2);
    console.log(
      `turn ${last.turn} / turn ${first.turn}: LLM job ${ratio(last.jobProto, first.jobProto)}x (protobuf), ${ratio(last.jobRowJson, first.jobRowJson)}x (outbox JSON); outbox per turn ${ratio(last.outboxTurn, first.outboxTurn)}x`,
    );
    console.log(
      `  had the job copied the history: ${ratio(last.copyProto, first.copyProto)}x (protobuf), ${ratio(last.copyJson, first.copyJson)}x (JSON); at turn ${last.turn} the claim check is ${ratio(last.copyJson, last.jobRowJson)}x smaller in the outbox`,
    );
  } finally {
    await consumer.close(0);
    await service.stop();
    await pool.end();
    for (const t of [transport, workers]) await t.close();
    const redis = new (await import('ioredis')).Redis(redisUrl);
    const keys = await redis.keys(`${prefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await db.drop();
  }
}

await main();
