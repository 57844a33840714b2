/**
 * Shared by the runLlmRequest tests (test/run-llm-request*.test.ts): the local fake Messages
 * server, started and closed around a test file by {@link useMessagesServer}, and runners that
 * send one job to it and read the outcome.
 */
import { beforeAll, afterAll } from '@jest/globals';
import { startMessagesApiServer, type MessagesApiServer, type ScriptedResponse } from '@bedrock/offline-model';
import type { LlmErrorEvent, LlmResponseEvent, TokenDeltaKind } from '@bedrock/contracts';
import { runLlmRequest, type LlmOutcome, type LlmRequest } from '../src/run-llm-request.ts';
import { makeJob, runOptions, sdkClient } from './helpers.ts';

export let server: MessagesApiServer;
/** Starts the fake Messages server before the calling test file's tests, and closes it after them. */
export function useMessagesServer(): void {
  beforeAll(async () => {
    server = await startMessagesApiServer();
  });
  afterAll(async () => {
    await server.close();
  });
}

export function response(o: LlmOutcome): LlmResponseEvent {
  if (o.case !== 'llmResponse')
    throw new Error(`expected a response, got error: ${JSON.stringify({ ...o.value, retryAfterMs: String(o.value.retryAfterMs) })}`);
  return o.value;
}
export function error(o: LlmOutcome): LlmErrorEvent {
  if (o.case !== 'llmError') throw new Error('expected an error, got a response');
  return o.value;
}

export async function run(scripted: ScriptedResponse, extra: Partial<Parameters<typeof runLlmRequest>[1]> = {}, options = runOptions()) {
  return runJob(makeJob(), scripted, extra, options);
}

/** Runs `job` against one scripted response; `sent` is the request body the server received. */
export async function runJob(
  job: LlmRequest,
  scripted: ScriptedResponse,
  extra: Partial<Parameters<typeof runLlmRequest>[1]> = {},
  options = runOptions(),
) {
  server.enqueue(scripted);
  const before = server.requests.length;
  const deltas: Array<[number, string, TokenDeltaKind]> = [];
  const outcome = await runLlmRequest(job, {
    client: sdkClient(server.url),
    options,
    onDelta: (i, t, k) => deltas.push([i, t, k]),
    ...extra,
  });
  const sent = server.requests.length > before ? server.requests.at(-1)!.body! : undefined;
  return { outcome, deltas, sent };
}
