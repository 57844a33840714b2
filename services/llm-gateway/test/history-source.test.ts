/**
 * Claim-check jobs: the gateway fetches the history a job names when it runs the job. A
 * conversation service that cannot be reached is a retryable network error (the state
 * machine retries with its backoff); a refused credential or an unknown history is not.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import { startMessagesApiServer, type MessagesApiServer } from '@bedrock/offline-model';
import { ErrorKind, LlmRequestJobSchema, Role } from '@bedrock/contracts';
import {
  createConversationHistorySource,
  memoryHistorySource,
  withDeadline,
  type HistoryClaim,
  type HistorySource,
} from '../src/history-source.ts';
import { runLlmJob, type LlmOutcome } from '../src/run-llm-request.ts';
import { makeJob, runOptions, sdkClient, testHistory, text } from './helpers.ts';

let server: MessagesApiServer;
beforeAll(async () => {
  server = await startMessagesApiServer();
});
afterAll(async () => {
  await server.close();
});

const errorOf = (o: LlmOutcome) => {
  if (o.case !== 'llmError') throw new Error('expected an error');
  return o.value;
};
const failing = (err: unknown): HistorySource => ({
  fetch: async () => {
    throw err;
  },
  close() {},
});

describe('runLlmJob: the history a job names', () => {
  it('fetches the history and sends it; the queued job itself carries none', async () => {
    const { messages, ...job } = makeJob({
      messages: [
        { role: Role.USER, content: [text('first')] },
        { role: Role.ASSISTANT, content: [text('reply')] },
        { role: Role.USER, content: [text('second')] },
      ],
    });
    const claims: HistoryClaim[] = [];
    const source = memoryHistorySource((claim) => {
      claims.push({ ...claim });
      return messages;
    });
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'ok' }] });
    const queued = create(LlmRequestJobSchema, { ...job, historyThrough: 3n, continuationPrompt: '' });
    const outcome = await runLlmJob(queued, { client: sdkClient(server.url), options: runOptions(), history: source });
    expect(outcome.case).toBe('llmResponse');
    expect(claims).toEqual(
      [{ conversationId: job.conversationId, historyThrough: 3n, continuationPrompt: '' }].map((c) => expect.objectContaining(c)),
    );
    const sent = server.requests.at(-1)!.body!;
    expect(sent.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
  });

  it('a conversation service that cannot be reached is a retryable network error', async () => {
    const unreachable = createConversationHistorySource({
      targets: ['http://127.0.0.1:1'],
      serviceToken: 'x',
      timeoutMs: 2_000,
      resolveIntervalMs: 0,
    });
    try {
      const before = server.requests.length;
      const e = errorOf(await runLlmJob(makeJob(), { client: sdkClient(server.url), options: runOptions(), history: unreachable }));
      expect(e).toMatchObject({ kind: ErrorKind.NETWORK, retryable: true, aborted: false });
      expect(e.message).toMatch(
        /^Could not fetch the conversation history from the conversation service \(Unavailable: .*\)\. The request will be retried\.$/,
      );
      // Nothing was sent to the model.
      expect(server.requests.length).toBe(before);
    } finally {
      unreachable.close();
    }
  });

  it('a slow or overloaded conversation service is retryable too; refusals and unknown histories are not', async () => {
    const cases: [Code, ErrorKind, boolean, RegExp][] = [
      [Code.DeadlineExceeded, ErrorKind.NETWORK, true, /will be retried/],
      [Code.ResourceExhausted, ErrorKind.NETWORK, true, /will be retried/],
      [Code.Internal, ErrorKind.NETWORK, true, /will be retried/],
      [Code.Unauthenticated, ErrorKind.AUTH, false, /BEDROCK_SERVICE_TOKEN_FILE.*"llm-gateway".*BEDROCK_SERVICE_PEERS_FILE/],
      [Code.PermissionDenied, ErrorKind.AUTH, false, /BEDROCK_SERVICE_PEERS_FILE/],
      [Code.NotFound, ErrorKind.INVALID_REQUEST, false, /retrying will not help/],
      [Code.FailedPrecondition, ErrorKind.INVALID_REQUEST, false, /retrying will not help/],
      [Code.InvalidArgument, ErrorKind.INVALID_REQUEST, false, /retrying will not help/],
    ];
    for (const [code, kind, retryable, message] of cases) {
      const e = errorOf(
        await runLlmJob(makeJob(), {
          client: sdkClient(server.url),
          options: runOptions(),
          history: failing(new ConnectError('no', code)),
        }),
      );
      expect([Code[code], ErrorKind[e.kind], e.retryable]).toEqual([Code[code], ErrorKind[kind], retryable]);
      expect(e.message).toMatch(message);
    }
  });

  it('a cancel before or during the fetch is acknowledged as aborted, with nothing sent', async () => {
    const controller = new AbortController();
    controller.abort();
    const before = errorOf(
      await runLlmJob(makeJob(), { client: sdkClient(server.url), options: runOptions(), history: testHistory, signal: controller.signal }),
    );
    expect(before).toMatchObject({ kind: ErrorKind.CANCELLED, aborted: true });
    const during = new AbortController();
    const hanging: HistorySource = {
      fetch: (_claim, signal) =>
        new Promise((_resolve, reject) => signal?.addEventListener('abort', () => reject(new ConnectError('cancelled', Code.Canceled)))),
      close() {},
    };
    const pending = runLlmJob(makeJob(), { client: sdkClient(server.url), options: runOptions(), history: hanging, signal: during.signal });
    during.abort();
    expect(errorOf(await pending)).toMatchObject({ kind: ErrorKind.CANCELLED, aborted: true });
  });

  it('an in-memory source answers NOT_FOUND for a conversation it does not know', async () => {
    const source = memoryHistorySource(() => undefined);
    await expect(source.fetch({ conversationId: 'c', historyThrough: 1n, continuationPrompt: '' })).rejects.toMatchObject({
      code: Code.NotFound,
    });
  });
});

describe('withDeadline: a source in this process (the embedded mode) is bounded as the gRPC client is', () => {
  const claim: HistoryClaim = { conversationId: 'c', historyThrough: 1n, continuationPrompt: '' };
  /** Never answers and ignores its signal, as a stuck database read would. */
  const stuck: HistorySource = { fetch: () => new Promise(() => {}), mcpTools: () => new Promise(() => {}), close() {} };

  it('passes answers and errors through unchanged', async () => {
    const source = withDeadline(testHistory, 1_000);
    const job = makeJob();
    expect(await source.fetch(job)).toEqual(await testHistory.fetch(job));
    await expect(
      withDeadline(
        memoryHistorySource(() => undefined),
        1_000,
      ).fetch(claim),
    ).rejects.toMatchObject({ code: Code.NotFound });
    expect(source.mcpTools).toBeUndefined();
  });

  it('a read that never answers fails DEADLINE_EXCEEDED, a retryable network error for the state machine', async () => {
    const started = Date.now();
    const outcome = await runLlmJob(makeJob(), { client: sdkClient(server.url), options: runOptions(), history: withDeadline(stuck, 50) });
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(errorOf(outcome)).toMatchObject({ kind: ErrorKind.NETWORK, retryable: true });
    expect(errorOf(outcome).message).toMatch(/DeadlineExceeded: the history read took longer than 50 ms/);
  });

  it('a cancelled job stops waiting at once, even for a read that ignores its signal', async () => {
    const during = new AbortController();
    const pending = runLlmJob(makeJob(), {
      client: sdkClient(server.url),
      options: runOptions(),
      history: withDeadline(stuck, 60_000),
      signal: during.signal,
    });
    during.abort();
    expect(errorOf(await pending)).toMatchObject({ kind: ErrorKind.CANCELLED, aborted: true });
    const early = new AbortController();
    early.abort();
    await expect(withDeadline(stuck, 60_000).mcpTools!('c', early.signal)).rejects.toMatchObject({ code: Code.Canceled });
  });
});
