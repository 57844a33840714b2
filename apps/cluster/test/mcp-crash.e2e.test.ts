/**
 * End to end: kill -9 of the tool-runner in the middle of an MCP call (server-everything's
 * long-running operation, from npm, run by the runner in its sandbox). The call is never run
 * again: another runner answers it interrupted from the run ledger, as for a built-in tool
 * (docs/mcp.md, "Calls"; docs/architecture.md, "Side effects after a crash"), and the
 * conversation comes to rest with every tool_use answered once.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StateKind } from '@bedrock/contracts';
import type { ScriptedMessage } from '@bedrock/offline-model';
import { startE2e, type E2e } from './support/e2e.ts';

const repo = new URL('../../../', import.meta.url).pathname;
const EVERYTHING = join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

let e: E2e;
beforeAll(async () => {
  e = await startE2e('mcpcrash', {
    env: { BEDROCK_MCP_SERVERS: JSON.stringify({ everything: { command: 'node', args: [EVERYTHING] } }) },
  });
}, 180_000);
afterAll(async () => {
  await e?.close();
}, 60_000);

const say = (text: string): ScriptedMessage => ({ kind: 'message', content: [{ type: 'text', text }] });
const call = (name: string, input: unknown): ScriptedMessage => ({ kind: 'message', content: [{ type: 'tool_use', name, input }] });

function parentPid(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/PPid:\s+(\d+)/.exec(status)![1]);
}

/** Processes whose command line holds `text`. */
function pidsRunning(text: string): number[] {
  return readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .flatMap((d) => {
      try {
        return readFileSync(`/proc/${d}/cmdline`, 'utf8').includes(text) ? [Number(d)] : [];
      } catch {
        return [];
      }
    });
}

describe('an MCP call across a runner crash', () => {
  it('kill -9 of the runner running it: answered interrupted by another runner, never run again', async () => {
    e.route('mcp runner victim', call('mcp__everything__trigger-long-running-operation', { duration: 30, steps: 30 }), say('Done.'));
    const id = (await e.client.createConversation({ cwd: '/tmp' })).conversation!.id;
    const watcher = e.watch(id);
    await e.waitFor('the watch snapshot', () => watcher.events.some((ev) => ev.kind.case === 'snapshot'));
    await e.client.sendMessage({ conversationId: id, text: 'mcp runner victim' });
    const output = () => watcher.events.flatMap((ev) => (ev.kind.case === 'toolOutput' ? [ev.kind.value.text] : [])).join('');
    await e.waitFor('the call to report progress', () => output().includes('[progress 1/30'), 90_000);

    // The runners whose process trees hold a server-everything (server → sandbox helper →
    // runner): the one running the call, and the one that listed the tools for the model
    // request when it was another. All of them die; a third runner is left to answer.
    const runners = e.cluster.processes.filter((p) => p.service === 'tool-runner');
    const victims = [
      ...new Set(
        pidsRunning(EVERYTHING).map((pid) => {
          let up = pid;
          while (up > 1 && !runners.some((r) => r.pid() === up)) up = parentPid(up);
          return runners.find((r) => r.pid() === up);
        }),
      ),
    ].filter((r) => r !== undefined);
    expect(victims.length).toBeGreaterThanOrEqual(1);
    expect(victims.length).toBeLessThan(runners.length);
    for (const victim of victims) victim.kill('SIGKILL');
    for (const victim of victims) await victim.exited();

    await e.waitFor(`${id} to come to rest`, async () => (await e.stateOf(id)) === StateKind.IDLE, 120_000);
    const { messages } = await e.client.getConversation({ conversationId: id });
    const asked = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolUse' ? [b.block.value.id] : [])));
    const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
    expect(results.map((r) => r.toolUseId)).toEqual(asked);
    expect(results).toHaveLength(1);
    expect(results[0]!.isError).toBe(true);
    expect(results[0]!.content).toContain('it was not run again');
    // The call started once: its first step's progress was streamed once.
    expect(output().match(/\[progress 1\/30/g)).toHaveLength(1);
    watcher.stop();
    for (const victim of victims) await e.cluster.restart(victim.name);
  }, 240_000);
});
