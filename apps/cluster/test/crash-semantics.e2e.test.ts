/**
 * End to end, crash semantics: no single replica in the path (kill -9 of a conversation replica: the
 * public API answers through the other at once, and the supervisor restarts the killed one), and nothing
 * that a single message can break for good (an image the model provider refuses becomes a note).
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import sharp from 'sharp';
import { MessageType, StateKind } from '@bedrock/contracts';
import type { ScriptedMessage } from '@bedrock/offline-model';
import { firstUserText, startE2e, type E2e } from './support/e2e.ts';

let e: E2e;
beforeAll(async () => {
  e = await startE2e('crash');
}, 180_000);
afterAll(async () => {
  await e?.close();
}, 60_000);

const say = (text: string): ScriptedMessage => ({ kind: 'message', content: [{ type: 'text', text }] });

async function idle(id: string) {
  await e.waitFor(`${id} to come to rest`, async () => (await e.stateOf(id)) === StateKind.IDLE, 60_000);
}

/** Count of calls a process served, from its /metrics (a restarted process starts from 0). */
async function rpcCalls(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  return [...text.matchAll(/^bedrock_rpc_server_seconds_count\{[^}]*method="bedrock\.v1\.ConversationService\/\w+"[^}]*\} (\d+)/gm)].reduce(
    (n, m) => n + Number(m[1]),
    0,
  );
}

describe('no single replica in the path', () => {
  it('kill -9 of a conversation replica: the API answers through the other at once, and the killed one comes back by itself', async () => {
    const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
    const victim = e.cluster.byName('conversation-1');
    const restartsBefore = victim.restarts();

    // Callers that never stop, through the whole outage.
    const failures: string[] = [];
    let calls = 0;
    let hammering = true;
    const hammer = (async () => {
      while (hammering) {
        try {
          await e.client.getConversation({ conversationId: conv.id });
          await e.client.listConversations({});
          calls += 2;
        } catch (err) {
          failures.push(err instanceof Error ? err.message : String(err));
        }
        await new Promise((r) => setTimeout(r, 10));
      }
    })();

    await new Promise((r) => setTimeout(r, 300));
    victim.kill('SIGKILL');
    await victim.exited();
    const killedAt = Date.now();
    const callsAtKill = calls;

    // A whole turn while the replica is down: sent, applied by the other replica, answered.
    // Without request ids, as a bare API client sends them: web-bff may not know yet that the
    // replica is gone, and a call its connection broke after it was sent is sent to the other
    // replica only when it cannot be applied twice (upstream/conversation-client.ts, retrySafe),
    // so web-bff gives each of these changes a request id of its own (upstream/request-ids.ts).
    e.route('while a replica is down', say('Answered by the replica that is left.'));
    const turn = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
    await e.client.sendMessage({ conversationId: turn.id, text: 'while a replica is down' });
    await idle(turn.id);
    const { messages } = await e.client.getConversation({ conversationId: turn.id });
    expect(messages.at(-1)!.type).toBe(MessageType.AGENT);

    // The supervisor brings it back by itself (no cluster.restart here).
    await e.waitFor(
      'conversation-1 to be restarted and ready',
      () => victim.restarts() > restartsBefore && victim.events.at(-1)?.kind === 'ready',
      60_000,
    );
    const log = readFileSync(victim.logFile, 'utf8');
    expect(log).toContain('"msg":"process exited unexpectedly; restarting it"');
    expect(log).toContain('"exit":"SIGKILL"');
    expect(log).toContain('"msg":"restarted process is ready"');

    // web-bff uses it again.
    await e.waitFor('web-bff to call the restarted replica', async () => (await rpcCalls(victim.metricsPort)) > 0, 20_000);
    hammering = false;
    await hammer;
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThan(callsAtKill + 20);
    const bffLog = readFileSync(e.cluster.byName('web-bff-1').logFile, 'utf8');
    expect(bffLog).toContain('"msg":"conversation replica failed; calls go to the other replicas"');
    expect(bffLog).toContain('"msg":"conversation replica answers again"');
    expect(Date.now() - killedAt).toBeLessThan(60_000);
  }, 120_000);

  it('cluster.restart(name) still starts a replica that was stopped for good', async () => {
    const p = e.cluster.byName('llm-gateway-2');
    await p.stop(5_000);
    expect(p.running()).toBe(false);
    await new Promise((r) => setTimeout(r, 1_000));
    expect(p.running()).toBe(false); // stopped on purpose: not restarted
    await e.cluster.restart('llm-gateway-2');
    expect(p.running()).toBe(true);
  }, 60_000);
});

describe('a bad image cannot brick a conversation', () => {
  it('an image the provider refuses becomes a note; the turn goes on and so do the next ones', async () => {
    const png = await sharp({ create: { width: 6, height: 4, channels: 3, background: { r: 250, g: 0, b: 0 } } })
      .png()
      .toBuffer();
    const refusedData = png.toString('base64');
    const reason = 'image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes';
    e.llm.refuseImages({ match: (image) => image.data === refusedData, reason });
    e.route('a picture the provider refuses', say('I could not see the picture.'), say('Second turn works.'), say('Third turn works.'));

    const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
    await e.client.sendMessage({
      conversationId: conv.id,
      text: 'a picture the provider refuses',
      images: [{ mediaType: 'image/png', data: png }],
    });
    await idle(conv.id);
    await e.client.sendMessage({ conversationId: conv.id, text: 'and now?' });
    await idle(conv.id);
    await e.client.sendMessage({ conversationId: conv.id, text: 'and again?' });
    await idle(conv.id);

    const { messages } = await e.client.getConversation({ conversationId: conv.id });
    const agent = messages.filter((m) => m.type === MessageType.AGENT).map((m) => (m.content[0]!.block.value as { text: string }).text);
    expect(agent).toEqual(['I could not see the picture.', 'Second turn works.', 'Third turn works.']);
    expect(messages.some((m) => m.type === MessageType.ERROR)).toBe(false);
    // The history keeps the user's image; only what is sent to the model changes.
    expect(messages[0]!.content.map((b) => b.block.case)).toEqual(['text', 'image']);

    const requests = e.llm.requests.filter((r) => firstUserText(r).startsWith('a picture the provider refuses'));
    const note = `[image removed: the model provider refused it: ${reason}]`;
    const imagesOf = (r: (typeof requests)[number]) =>
      r.body!.messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'image')));
    const notesOf = (r: (typeof requests)[number]) =>
      r.body!.messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content.filter((b) => b.type === 'text' && b.text === note)));
    // The refused request carried the image; every answered one carried the note instead.
    expect(imagesOf(requests[0]!)).toHaveLength(1);
    const answered = requests.filter((r) => imagesOf(r).length === 0);
    expect(answered).toHaveLength(3);
    for (const r of answered) expect(notesOf(r)).toHaveLength(1);
    // At most one refusal per gateway replica: each remembers the image afterwards.
    expect(requests.length - answered.length).toBeLessThanOrEqual(2);
    e.llm.clearImageRefusals();
  }, 120_000);
});
