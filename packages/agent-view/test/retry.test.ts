/** Retries of user actions (src/retry.ts, shared by the web UI and the CLI). */
import { describe, expect, it } from '@jest/globals';
import { Code, ConnectError } from '@connectrpc/connect';
import { DEFAULT_RETRY_POLICY, newRequestId, retriesExhausted, retrying, type RetryNotice } from '../src/retry.ts';

/** A clock the fake sleep advances. */
function fakeTime() {
  let now = 0;
  const slept: number[] = [];
  return {
    now: () => now,
    slept,
    sleep: async (ms: number) => {
      slept.push(ms);
      now += ms;
    },
  };
}

const fails = (code: Code, times: number, then = 'ok') => {
  const ids: string[] = [];
  let n = 0;
  const call = async (requestId: string) => {
    ids.push(requestId);
    if (n++ < times) throw new ConnectError(`attempt ${n} failed`, code);
    return then;
  };
  return { ids, call };
};

describe('retrying', () => {
  it('retries UNAVAILABLE and ABORTED with the same request id, with growing delays, and tells each retry', async () => {
    for (const code of [Code.Unavailable, Code.Aborted]) {
      const t = fakeTime();
      const { ids, call } = fails(code, 3);
      const notices: RetryNotice[] = [];
      expect(await retrying(call, { ...t, random: () => 0.5, onRetry: (n) => notices.push(n) })).toBe('ok');
      expect(ids).toHaveLength(4);
      expect(new Set(ids).size).toBe(1);
      expect(ids[0]).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
      expect(t.slept).toEqual([250, 500, 1000]);
      expect(notices.map((n) => [n.attempt, n.attempts, n.error.code])).toEqual([
        [2, 6, code],
        [3, 6, code],
        [4, 6, code],
      ]);
    }
  });

  it('a fresh id for each action', async () => {
    const a = fails(Code.Unavailable, 0);
    const b = fails(Code.Unavailable, 0);
    await retrying(a.call);
    await retrying(b.call);
    expect(a.ids[0]).not.toBe(b.ids[0]);
    expect(new Set(Array.from({ length: 1000 }, newRequestId)).size).toBe(1000);
  });

  it('other errors are not retried and come out unchanged', async () => {
    for (const code of [Code.FailedPrecondition, Code.InvalidArgument, Code.Internal, Code.DeadlineExceeded, Code.Unauthenticated]) {
      const { ids, call } = fails(code, 1);
      const err = await retrying(call, fakeTime()).catch((e: unknown) => e as ConnectError);
      expect(ids).toHaveLength(1);
      expect([(err as ConnectError).code, (err as ConnectError).rawMessage]).toEqual([code, 'attempt 1 failed']);
      expect(retriesExhausted(err)).toBeUndefined();
    }
  });

  it("gives up after the attempts of the policy, saying so, with the last error's code", async () => {
    const t = fakeTime();
    const { ids, call } = fails(Code.Unavailable, 100);
    const err = (await retrying(call, { ...t, random: () => 0.5 }).catch((e: unknown) => e)) as ConnectError;
    expect(ids).toHaveLength(DEFAULT_RETRY_POLICY.attempts);
    expect(err.code).toBe(Code.Unavailable);
    expect(err.rawMessage).toBe('attempt 6 failed (gave up after 6 attempts over 7.8s)');
    expect(retriesExhausted(err)).toMatchObject({ attempts: 6, elapsedMs: 7750 });
    expect(retriesExhausted(err)?.last.rawMessage).toBe('attempt 6 failed');
  });

  it('gives up when the next attempt would start after the time budget', async () => {
    const t = fakeTime();
    const { ids, call } = fails(Code.Unavailable, 100);
    const policy = { ...DEFAULT_RETRY_POLICY, attempts: 100, budgetMs: 2000 };
    const err = (await retrying(call, { ...t, policy, random: () => 0.5 }).catch((e: unknown) => e)) as ConnectError;
    // 250 + 500 + 1000 = 1750 ms waited; one more (2000 ms) would pass the budget.
    expect(ids).toHaveLength(4);
    expect(t.slept.reduce((a, b) => a + b, 0)).toBeLessThanOrEqual(2000);
    expect(retriesExhausted(err)?.attempts).toBe(4);
  });

  it('stops waiting when its signal is aborted', async () => {
    const abort = new AbortController();
    const { ids, call } = fails(Code.Unavailable, 100);
    const p = retrying(call, { signal: abort.signal }).catch((e: unknown) => e as ConnectError);
    setTimeout(() => abort.abort(), 50);
    const err = (await p) as ConnectError;
    expect(ids.length).toBeLessThanOrEqual(2);
    expect(err.code).toBe(Code.Canceled);
  });
});
