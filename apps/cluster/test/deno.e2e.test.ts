/**
 * Deno: every service starts under Deno (from the npm `deno` package, running the same
 * TypeScript) and a turn with a tool call, a cancel and a watch stream works end to end.
 */
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { MessageType, Mode, StateKind } from '@bedrock/contracts';
import { startE2e, type E2e } from './support/e2e.ts';

let e: E2e;
beforeAll(async () => {
  e = await startE2e('deno', { runtime: 'deno', replicas: { conversation: 1, gateway: 1, toolRunner: 1 } });
}, 240_000);
afterAll(async () => {
  await e?.close();
}, 60_000);

describe('under Deno', () => {
  it('runs every service and a full turn with a sandboxed tool', async () => {
    expect(e.cluster.processes.map((p) => p.name)).toEqual(['conversation-1', 'llm-gateway-1', 'tool-runner-1', 'web-bff-1']);
    for (const p of e.cluster.processes) {
      // The process really is Deno, running the service's TypeScript entry point.
      const argv = readFileSync(`/proc/${p.pid()}/cmdline`, 'utf8').split('\0');
      expect(argv[0]).toMatch(/deno$/);
      expect(argv).toContain(`${process.cwd()}/services/${p.service}/src/main.ts`);
    }
    e.route(
      'deno smoke',
      {
        kind: 'message',
        content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo hi from deno; touch /tmp/deno-should-not-write' } }],
      },
      { kind: 'message', content: [{ type: 'text', text: 'Done under Deno.' }] },
    );
    const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
    expect(conv.mode).toBe(Mode.RESTRICTED);
    const watcher = e.watch(conv.id);
    await e.client.sendMessage({ conversationId: conv.id, text: 'deno smoke' });
    await e.waitFor('idle', async () => (await e.stateOf(conv.id)) === StateKind.IDLE, 60_000);
    const { messages } = await e.client.getConversation({ conversationId: conv.id });
    expect(messages.map((m) => m.type)).toEqual([MessageType.USER, MessageType.AGENT, MessageType.TOOL, MessageType.AGENT]);
    const result = messages[2]!.content[0]!.block;
    expect(result.case === 'toolResult' && result.value.content).toMatch(/hi from deno[\s\S]*Permission denied/);
    await e.waitFor('the watch stream to show the persisted answer', () =>
      watcher.events.some((ev) => ev.kind.case === 'messagePersisted' && ev.kind.value.message?.type === MessageType.AGENT),
    );
    watcher.stop();
  }, 120_000);

  it('cancels a running tool under Deno', async () => {
    e.route('deno cancel', { kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'sleep 300' } }] });
    const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
    await e.client.sendMessage({ conversationId: conv.id, text: 'deno cancel' });
    await e.waitFor('the tool to run', async () => (await e.stateOf(conv.id)) === StateKind.TOOL_EXECUTING, 60_000);
    await e.client.cancel({ conversationId: conv.id });
    await e.waitFor('idle', async () => (await e.stateOf(conv.id)) === StateKind.IDLE);
  }, 120_000);
});
