/**
 * metadata.user_id on the shipped defaults (no BEDROCK_OWNER_REF_SECRET_FILE): every LLM request
 * job carries an owner reference made with the deployment's own secret (kept in Postgres, the
 * same for every replica) — stable per user, different between users, never the user id.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'ownerref' });
});
afterAll(async () => {
  await h?.close();
});

async function refOf(user: string): Promise<string> {
  const id = await h.createConversation(user);
  await h.client(user).sendMessage({ conversationId: id, text: 'hello' });
  return (await h.llmJob(id)).ownerRef;
}

describe('the owner reference on the defaults', () => {
  it('is sent, stable per user across conversations and replicas, opaque, and different between users', async () => {
    const first = await refOf('alice');
    expect(first).toMatch(/^[0-9a-f]{64}$/);
    expect(first).not.toContain('alice');
    expect(await refOf('alice')).toBe(first);
    expect(await refOf('bob')).not.toBe(first);
    // A replica started later reads the same secret.
    const replica = await h.startReplica();
    const id = await h.createConversation('alice');
    await h.client('alice', replica).sendMessage({ conversationId: id, text: 'again' });
    expect((await h.llmJob(id)).ownerRef).toBe(first);
  });
});
