/**
 * End to end under failure: kill -9 of a gateway, a tool-runner and a conversation replica in
 * the middle of turns, and Redis restarted (losing everything it held) mid-turn. Every
 * conversation must come to rest with a valid tool_use/tool_result chain and nothing that
 * was persisted lost. This cluster has its own Redis server so the restart is safe.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MessageType, StateKind } from '@bedrock/contracts';
import type { ScriptedMessage } from '@bedrock/offline-model';
import { freePort } from '@bedrock/platform/server';
import { startE2e, type E2e } from './support/e2e.ts';
import { OwnRedis } from './support/own-redis.ts';

let e: E2e;
let redis: OwnRedis;

beforeAll(async () => {
  redis = new OwnRedis(await freePort());
  await redis.start();
  // The shipped defaults: a dead consumer's jobs are taken back within seconds.
  e = await startE2e('resilience', { redisUrl: redis.url });
}, 180_000);

afterAll(async () => {
  await e?.close();
  await redis?.kill();
}, 60_000);

const say = (text: string, delayMs = 0): ScriptedMessage => ({ kind: 'message', content: [{ type: 'text', text }], delayMs });
const bash = (command: string): ScriptedMessage => ({ kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command } }] });

async function converse(text: string) {
  const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
  await e.client.sendMessage({ conversationId: conv.id, text });
  return conv.id;
}

/** At rest (idle), with every tool_use answered exactly once, in order, and the first message kept. */
async function atRestWithValidChain(id: string, firstText: string) {
  await e.waitFor(`${id} to come to rest`, async () => (await e.stateOf(id)) === StateKind.IDLE, 90_000);
  const { messages } = await e.client.getConversation({ conversationId: id });
  expect(messages[0]!.type).toBe(MessageType.USER);
  expect(messages[0]!.content[0]!.block.value).toMatchObject({ text: firstText });
  const asked = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolUse' ? [b.block.value.id] : [])));
  const answered = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value.toolUseId] : [])));
  expect(answered).toEqual(asked);
  return messages;
}

function parentPid(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/PPid:\s+(\d+)/.exec(status)![1]);
}

describe('failures in the middle of turns', () => {
  it('survives kill -9 of a gateway holding requests', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      // The first answer is slow, so the request is in flight when the gateway dies; the second
      // answers the redelivered request.
      e.route(`gateway victim ${i}`, say(`slow ${i}`, 4000), say(`answered ${i}`));
      ids.push(await converse(`gateway victim ${i}`));
    }
    await e.waitFor('all requests in flight', () =>
      ids.every((_, i) => e.llm.requests.some((r) => JSON.stringify(r.body?.messages ?? []).includes(`gateway victim ${i}`))),
    );
    const victim = e.cluster.byName('llm-gateway-1');
    victim.kill('SIGKILL');
    await victim.exited();
    for (const [i, id] of ids.entries()) await atRestWithValidChain(id, `gateway victim ${i}`);
    await e.cluster.restart('llm-gateway-1');
  }, 120_000);

  it('survives kill -9 of the tool-runner running a tool: another runner answers it interrupted, never running it again', async () => {
    e.route('runner victim', bash('echo PID=$$; sleep 2; echo finished'), say('The tool finished.'));
    const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
    const id = conv.id;
    const watcher = e.watch(id);
    await e.waitFor('the watch snapshot', () => watcher.events.some((ev) => ev.kind.case === 'snapshot'));
    await e.client.sendMessage({ conversationId: id, text: 'runner victim' });
    const pid = await e.waitFor('the tool to print its pid', () => {
      const out = watcher.events.flatMap((ev) => (ev.kind.case === 'toolOutput' ? [ev.kind.value.text] : [])).join('');
      const m = /PID=(\d+)/.exec(out);
      return m ? Number(m[1]) : undefined;
    });
    // Walk up from the tool's bash to the runner process that started it.
    let runnerPid = parentPid(pid);
    const runners = e.cluster.processes.filter((p) => p.service === 'tool-runner');
    while (!runners.some((r) => r.pid() === runnerPid) && runnerPid > 1) runnerPid = parentPid(runnerPid);
    const victim = runners.find((r) => r.pid() === runnerPid);
    expect(victim).toBeDefined();
    victim!.kill('SIGKILL');
    await victim!.exited();
    const messages = await atRestWithValidChain(id, 'runner victim');
    const result = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value.content] : [])));
    expect(result).toEqual(['The tool-runner stopped while this command was running (it may have partly run); it was not run again.']);
    // The command started once (docs/architecture.md, "Side effects after a crash").
    const output = watcher.events.flatMap((ev) => (ev.kind.case === 'toolOutput' ? [ev.kind.value.text] : [])).join('');
    expect(output.match(/PID=/g)).toHaveLength(1);
    watcher.stop();
    await e.cluster.restart(victim!.name);
  }, 120_000);

  it('survives kill -9 of a conversation replica while turns are being applied', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 6; i++) {
      e.route(`replica victim ${i}`, bash(`echo step ${i}`), bash(`echo again ${i}`), say(`done ${i}`));
      ids.push(await converse(`replica victim ${i}`));
    }
    const victim = e.cluster.byName('conversation-2');
    victim.kill('SIGKILL');
    await victim.exited();
    for (const [i, id] of ids.entries()) {
      const messages = await atRestWithValidChain(id, `replica victim ${i}`);
      expect(messages.at(-1)!.type).toBe(MessageType.AGENT);
    }
    await e.cluster.restart('conversation-2');
  }, 120_000);

  it('survives a Redis restart that loses every job and stream mid-turn', async () => {
    e.route('redis victim', bash('sleep 3; echo survived'), say('After the restart.'), say('After the restart.'));
    const id = await converse('redis victim');
    await e.waitFor('the tool to run', async () => (await e.stateOf(id)) === StateKind.TOOL_EXECUTING);
    await redis.kill();
    await redis.start();
    await atRestWithValidChain(id, 'redis victim');
    // The system works normally afterwards.
    e.route('after redis', say('Still here.'));
    const next = await converse('after redis');
    await atRestWithValidChain(next, 'after redis');
  }, 150_000);
});
