/**
 * Retries (REQ-BED-006): visible attempts and backoff (state and retry_scheduled
 * notifications), the provider's retry-after respected, at most three attempts, then Error
 * with its ErrorKind, and recovery by a new message. The base delay is 50 ms here.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ErrorKind, MessageType, StateKind } from '@bedrock/contracts';
import { text, textOf } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
const arrivedAt = new Map<string, number>();
beforeAll(async () => {
  h = await startHarness({ label: 'retries' });
  h.onLlmJob = async (job) => void arrivedAt.set(job.requestId, Date.now());
});
afterAll(async () => {
  await h?.close();
});

const retries = async (id: string) => (await h.notifications(id)).flatMap((e) => (e.kind.case === 'retryScheduled' ? [e.kind.value] : []));

describe('retries', () => {
  it('backs off exponentially with visible attempts, then fails with the error kind after three, and a new message recovers', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'hello' });
    const sentAt: number[] = [];
    for (let attempt = 1; attempt <= 3; attempt++) {
      const job = await h.llmJob(id, attempt - 1);
      expect(job.attempt).toBe(attempt);
      if (attempt > 1) {
        // Never sooner than the backoff: 50 ms, then 100 ms.
        expect(arrivedAt.get(job.requestId)! - sentAt[attempt - 2]!).toBeGreaterThanOrEqual(50 * 2 ** (attempt - 2));
      }
      sentAt.push(Date.now());
      await h.fail(job, { kind: ErrorKind.SERVER, retryable: true, message: 'Overloaded', httpStatus: 529 });
      if (attempt === 1) {
        // The late answer of the failed attempt changes nothing.
        await h.processed(`e/${job.requestId}`);
        await h.respond(job, { content: [text('too late')] }, 'late');
      }
    }
    await h.waitState(id, StateKind.ERROR);
    await h.processed('late');
    const got = await h.get(id);
    expect(got.conversation!.state!.errorKind).toBe(ErrorKind.SERVER);
    expect(got.conversation!.state!.errorMessage).toBe('Failed after 3 attempts: Overloaded');
    expect(got.messages.map((m) => MessageType[m.type])).toEqual(['USER', 'ERROR']);
    expect(textOf(got.messages[1]!.content)).toBe('Failed after 3 attempts: Overloaded');
    expect((await retries(id)).map((r) => [r.attempt, r.maxAttempts, r.delayMs, r.errorKind, r.errorMessage])).toEqual([
      [2, 3, 50n, ErrorKind.SERVER, 'Overloaded'],
      [3, 3, 100n, ErrorKind.SERVER, 'Overloaded'],
    ]);
    const attempts = (await h.notifications(id)).flatMap((e) =>
      e.kind.case === 'stateChanged' && e.kind.value.state!.kind === StateKind.LLM_REQUESTING
        ? [[e.kind.value.state!.attempt, e.kind.value.state!.maxAttempts]]
        : [],
    );
    expect(attempts).toEqual(
      expect.arrayContaining([
        [1, 3],
        [2, 3],
        [3, 3],
      ]),
    );

    await h.client().sendMessage({ conversationId: id, text: 'again' });
    const next = await h.llmJob(id, 3);
    expect(next.attempt).toBe(1);
    await h.respond(next, { content: [text('hi')] });
    await h.waitState(id, StateKind.IDLE);
  });

  it("waits at least the provider's retry-after", async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'hello' });
    const job = await h.llmJob(id);
    const sent = Date.now();
    await h.fail(job, { kind: ErrorKind.RATE_LIMIT, retryable: true, message: 'Rate limited', retryAfterMs: 400n, httpStatus: 429 });
    await h.waitFor('the visible delay', async () => (await h.get(id)).conversation!.state!.retryDelayMs === 400n);
    const second = await h.llmJob(id, 1);
    expect(arrivedAt.get(second.requestId)! - sent).toBeGreaterThanOrEqual(400);
    expect((await retries(id)).map((r) => [r.attempt, r.delayMs, r.errorKind])).toEqual([[2, 400n, ErrorKind.RATE_LIMIT]]);
  });

  it('goes to Error at once on a non-retryable error, keeping its kind', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'hello' });
    await h.fail(await h.llmJob(id), { kind: ErrorKind.INVALID_REQUEST, retryable: false, message: 'Invalid request: image too large' });
    await h.waitState(id, StateKind.ERROR);
    const state = (await h.get(id)).conversation!.state!;
    expect([state.errorKind, state.errorMessage]).toEqual([ErrorKind.INVALID_REQUEST, 'Invalid request: image too large']);
    expect(h.llmJobsOf(id)).toHaveLength(1);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
});
