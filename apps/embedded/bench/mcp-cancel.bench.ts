/**
 * `make bench BENCH=mcp-cancel`: a running MCP call cancelled through the embedded product (offline
 * model, real sandbox), from the Cancel RPC to the call's tool_result on the watch stream, on
 * server-everything's long-running operation (it stops when sent notifications/cancelled) and the
 * fixture's `hang` (it ignores that, and the runner kills it after). Prints median, p90 and max; asserts
 * nothing. docs/mcp.md, "Calls, timeouts, cancel, errors".
 */
import { StateKind } from '@bedrock/contracts';
import { EVERYTHING, FIXTURE, startBench, until, watch } from './mcp-support.ts';

/** Cancels of each server (BENCH_CANCELS). */
const CANCELS = Number(process.env.BENCH_CANCELS ?? 10);

const b = await startBench('mcp-cancel', {
  everything: { command: 'node', args: [EVERYTHING] },
  fixture: { command: 'node', args: [FIXTURE] },
});
try {
  const id = (await b.conversations.createConversation({ cwd: b.workspace })).conversation!.id;
  for (const [label, line, running] of [
    [
      'server-everything (stops on notifications/cancelled)',
      '$mcp everything trigger-long-running-operation {"duration": 60, "steps": 60}',
      '[progress 1/60',
    ],
    ['fixture hang (ignores it; killed after)', '$mcp fixture hang {}', ''],
  ] as const) {
    const figures: number[] = [];
    for (let i = 0; i < CANCELS; i++) {
      const w = watch(b, id);
      await b.conversations.sendMessage({ conversationId: id, text: line });
      await until('the call to run', async () => (await b.stateOf(id)) === StateKind.TOOL_EXECUTING, 60_000, 20);
      if (running) await until('its first progress', () => w.output().includes(running), 60_000);
      else await new Promise((r) => setTimeout(r, 500));
      const t0 = performance.now();
      await b.conversations.cancel({ conversationId: id });
      await until('the tool_result', () => w.resultAt(t0) !== undefined, 30_000, 1);
      figures.push(w.resultAt(t0)! - t0);
      w.stop();
      await until('rest', async () => (await b.stateOf(id)) === StateKind.IDLE, 30_000, 20);
    }
    figures.sort((x, y) => x - y);
    const at = (p: number) => figures[Math.min(figures.length - 1, Math.floor(p * figures.length))]!.toFixed(0);
    console.log(`${label}: Cancel RPC → tool_result, ${CANCELS} cancels: median ${at(0.5)} ms, p90 ${at(0.9)} ms, max ${at(1)} ms`);
  }
} finally {
  await b.close();
}
