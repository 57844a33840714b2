import { describe, expect, it } from '@jest/globals';
import { Code, ConnectError } from '@connectrpc/connect';
import { storageFailure } from './storage-client.ts';

describe('storageFailure', () => {
  const what = 'cannot rewind the files of conversation c1';
  it("keeps the storage's words for what the caller can act on", () => {
    const e = storageFailure(new ConnectError('the clone failed: no such repository', Code.FailedPrecondition), what);
    expect([e.code, e.rawMessage]).toEqual([Code.FailedPrecondition, `${what}: the clone failed: no such repository`]);
    expect(storageFailure(new ConnectError('bad id', Code.InvalidArgument), what).code).toBe(Code.InvalidArgument);
    // The conversation is there: a checkpoint it names that is gone is a precondition, not a missing resource.
    expect(storageFailure(new ConnectError('no checkpoint t-6', Code.NotFound), what).code).toBe(Code.FailedPrecondition);
  });

  it('says what failed when the storage answered with a failure (no retry helps)', () => {
    const e = storageFailure(new ConnectError('limiting /srv/ws/.rew-x: EDQUOT', Code.Internal), what);
    expect([e.code, e.rawMessage]).toEqual([
      Code.Internal,
      `${what}: the workspace storage (tool-runner) failed: limiting /srv/ws/.rew-x: EDQUOT`,
    ]);
  });

  it('asks to try again when the storage did not answer', () => {
    for (const code of [Code.Unavailable, Code.DeadlineExceeded, Code.Unknown]) {
      const e = storageFailure(new ConnectError('connect ECONNREFUSED', code), what);
      expect(e.code).toBe(Code.Unavailable);
      expect(e.rawMessage).toBe(`${what}: the workspace storage (tool-runner) did not answer (${Code[code]}); try again shortly`);
    }
    expect(storageFailure(new Error('socket hang up'), what).code).toBe(Code.Unavailable);
  });
});
