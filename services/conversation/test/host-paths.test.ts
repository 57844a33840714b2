/**
 * With host paths off (the default), a conversation is never created at a host path: every
 * absolute path gets the same PERMISSION_DENIED, whether it exists or not, so the answer tells
 * nothing about the host. Without workspace storage, a workspace conversation says what to ask for.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'hostpaths', playWorkers: false, config: { workspaces: { hostPaths: 'off' } } });
});
afterAll(async () => {
  await h?.close();
});

describe('host paths off', () => {
  it('refuses every absolute path alike, revealing nothing', async () => {
    const answers = [];
    for (const cwd of ['/etc', '/root/.ssh', '/does/not/exist', '/var/lib/postgresql', '/']) {
      const err = await rpcError(h.client('alice').createConversation({ cwd }));
      expect(err.code).toBe(Code.PermissionDenied);
      answers.push(err.rawMessage);
    }
    expect(new Set(answers).size).toBe(1);
    expect(answers[0]).toMatch(/host paths are off on this deployment: create the conversation in one of your workspaces/);
  });

  it('says what is missing when the deployment has no workspace storage', async () => {
    const err = await rpcError(h.client('alice').createConversation({ cwd: 'src' }));
    expect(err.code).toBe(Code.FailedPrecondition);
    expect(err.rawMessage).toMatch(/no workspace storage \(BEDROCK_WORKSPACE_STORAGE_URL is unset\)/);
  });

  it('refuses a directory that climbs out of the workspace', async () => {
    const err = await rpcError(h.client('alice').createConversation({ cwd: '../other' }));
    expect(err.code).toBe(Code.InvalidArgument);
  });
});
