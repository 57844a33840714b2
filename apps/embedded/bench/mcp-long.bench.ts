/**
 * `make bench BENCH=mcp-long`: server-everything's long-running operation for BENCH_MCP_SECONDS with a
 * progress notification every 10 s, under the shipped per-call timeout (BEDROCK_MCP_TIMEOUT), through
 * the embedded product (offline model, real sandbox): it completes only because each progress starts
 * the timeout again. Prints how long it took, the progress lines streamed and the result; asserts
 * nothing. docs/mcp.md, "Calls, timeouts, cancel, errors".
 */
import { StateKind } from '@bedrock/contracts';
import { EVERYTHING, startBench, until, watch } from './mcp-support.ts';

/** The call's length, s (BENCH_MCP_SECONDS; by default the 10 minutes of issue 26: "a 10-minute call with progress completes"). */
const SECONDS = Number(process.env.BENCH_MCP_SECONDS ?? 600);
const STEPS = Math.max(1, Math.round(SECONDS / 10));

const b = await startBench('mcp-long', { everything: { command: 'node', args: [EVERYTHING] } });
try {
  const id = (await b.conversations.createConversation({ cwd: b.workspace })).conversation!.id;
  const w = watch(b, id);
  const started = performance.now();
  await b.conversations.sendMessage({
    conversationId: id,
    text: `$mcp everything trigger-long-running-operation {"duration": ${SECONDS}, "steps": ${STEPS}}`,
  });
  await until('the call to end', () => w.resultAt(started) !== undefined, (SECONDS + 120) * 1000, 500);
  const took = (w.resultAt(started)! - started) / 1000;
  await until('rest', async () => (await b.stateOf(id)) === StateKind.IDLE, 60_000, 100);
  w.stop();
  const { messages } = await b.conversations.getConversation({ conversationId: id });
  const result = messages.flatMap((m) => m.content.flatMap((x) => (x.block.case === 'toolResult' ? [x.block.value] : []))).at(-1);
  const progress = (w.output().match(/\[progress /g) ?? []).length;
  console.log(`a ${SECONDS} s call, progress every ${SECONDS / STEPS} s, timeout 5 min: ended after ${took.toFixed(1)} s`);
  console.log(
    `progress lines streamed: ${progress} of ${STEPS}; result ${result?.isError ? 'ERROR' : 'ok'}: ${result?.content.slice(0, 200)}`,
  );
} finally {
  await b.close();
}
