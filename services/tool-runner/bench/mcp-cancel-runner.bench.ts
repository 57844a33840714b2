/**
 * Cancel of a running MCP call on the tool-runner (issue 26: "cancel stops a call within 100 ms"):
 * from the CancelSignal on the Redis cancel channel to the call's result marked cancelled, for
 * server-everything's long-running operation and the fixture's `hang` (which ignores the cancel;
 * also timed until its process is gone). Asserts nothing. The public API's figure is
 * apps/embedded/bench/mcp-cancel.bench.ts; docs/mcp.md, "Calls, timeouts, cancel, errors".
 */
import { chmodSync, chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { execSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import { CancelSignalSchema, McpServerSpecSchema, Mode, ToolExecJobSchema } from '@bedrock/contracts';
import { createRedisTransport } from '@bedrock/platform';
import { createLogger } from '@bedrock/platform/server';
import { readToolRunnerConfig } from '../src/config.ts';
import { createToolRunner } from '../src/create-tool-runner.ts';
import { quantile, summary } from './stats.ts';

/** Cancels timed per kind (BENCH_ROUNDS, default 20). */
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 20);
const repo = new URL('../../../', import.meta.url).pathname;
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = `bedrock-bench-mcp-cancel-${process.pid}`;
const cwd = mkdtempSync(join(tmpdir(), 'bedrock-mcp-cancel-bench-'));
if (process.getuid?.() === 0) chownSync(cwd, 65534, 65534);
else chmodSync(cwd, 0o777);

const transport = createRedisTransport({ redisUrl, prefix, onError: () => {} });
const runnerTransport = createRedisTransport({ redisUrl, prefix, onError: () => {} });
const runner = createToolRunner(
  readToolRunnerConfig(
    {},
    { runner: { id: `bench-${process.pid}`, consume: true }, server: { host: '127.0.0.1', grpcPort: 0, metricsPort: 0 } },
  ),
  { transport: runnerTransport, logger: createLogger({ service: 'tool-runner', level: 'silent' }) },
);
await runner.start();

/** One server process per kind, started before the first round, as a conversation's would be. */
const servers = {
  everything: create(McpServerSpecSchema, {
    name: 'everything',
    command: 'node',
    args: [join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')],
  }),
  fixture: create(McpServerSpecSchema, {
    name: 'fixture',
    command: 'node',
    args: [join(repo, 'services/tool-runner/test/fixtures/mcp-fixture-server.mjs')],
  }),
};

/** This process's descendants whose command line holds `text` (the servers its runner started). */
function pidsRunning(text: string): number[] {
  const out = execSync(`pgrep -f ${JSON.stringify(text)} || true`, { encoding: 'utf8' });
  const ours = (pid: number): boolean => {
    for (let up = pid; up > 1;) {
      if (up === process.pid) return true;
      try {
        up = Number(/PPid:\s+(\d+)/.exec(readFileSync(`/proc/${up}/status`, 'utf8'))![1]);
      } catch {
        return false;
      }
    }
    return false;
  };
  return out.split('\n').filter(Boolean).map(Number).filter(ours);
}

/** The fixture's server running and idle (a call of a quick tool starts it, after the last round's was killed). */
async function hangReady(i: number): Promise<void> {
  const warm = create(ToolExecJobSchema, {
    toolUseId: `mcp-cancel-warm-${i}`,
    conversationId: 'bench',
    toolName: 'mcp__fixture__unannotated',
    inputJson: '{}',
    cwd,
    mode: Mode.UNRESTRICTED,
    mcpServer: servers.fixture,
  });
  await runner.executor.execute(warm, () => {});
}

/**
 * `everything`: server-everything's long-running operation, which stops on notifications/cancelled.
 * `hang`: the fixture's `hang`, which ignores it: also the time until its process is gone (killed
 * in the background after a ping it does not answer); its server is started (by a quick call)
 * before each round, so that the call reaches it.
 */
async function measure(kind: 'everything' | 'hang'): Promise<{ result: number[]; gone: number[] }> {
  const result: number[] = [];
  const gone: number[] = [];
  const spec = kind === 'everything' ? servers.everything : servers.fixture;
  const [toolName, input] =
    kind === 'everything' ? ['mcp__everything__trigger-long-running-operation', { duration: 60, steps: 60 }] : ['mcp__fixture__hang', {}];
  for (let i = 0; i < ROUNDS; i++) {
    const id = `mcp-cancel-${kind}-${i}`;
    if (kind === 'hang') await hangReady(i);
    let text = '';
    let progressed!: () => void;
    const running = new Promise<void>((resolve) => (progressed = resolve));
    const job = create(ToolExecJobSchema, {
      toolUseId: id,
      conversationId: 'bench',
      toolName,
      inputJson: JSON.stringify(input),
      cwd,
      mode: Mode.UNRESTRICTED,
      mcpServer: spec,
    });
    const done = runner.executor.execute(job, (chunk) => {
      text += chunk;
      if (text.includes('[progress 1/')) progressed();
    });
    // Running: its first progress (everything), or half a second in (hang reports none).
    const ended = await Promise.race([
      done.then((r) => r as { content?: string }),
      (kind === 'everything' ? running : new Promise((r) => setTimeout(r, 500))).then(() => undefined),
    ]);
    if (ended) throw new Error(`round ${i}: the call ended before the cancel: ${ended.content}`);
    const before = kind === 'hang' ? pidsRunning('mcp-fixture-server.mjs') : [];
    const t0 = performance.now();
    await transport.cancels.publish(create(CancelSignalSchema, { conversationId: 'bench', target: { case: 'toolUseId', value: id } }));
    const r = (await done) as { cancelled?: boolean };
    if (!r.cancelled) throw new Error(`round ${i}: result not marked cancelled`);
    result.push(performance.now() - t0);
    if (kind === 'hang') {
      while (before.some((pid) => pidsRunning('mcp-fixture-server.mjs').includes(pid))) await new Promise((res) => setTimeout(res, 5));
      gone.push(performance.now() - t0);
    }
  }
  return { result, gone };
}

const everything = await measure('everything');
const hang = await measure('hang');
console.log(`MCP cancel on the tool-runner (CancelSignal on Redis -> result cancelled), ${ROUNDS} rounds each`);
console.log(`  server-everything long-running operation   ${summary(everything.result)}`);
console.log(`  fixture hang (ignores the cancel)           ${summary(hang.result)}`);
console.log(`  fixture hang: until its process is gone     ${summary(hang.gone)}`);
const verdict = (v: number[]): string => (quantile(v, 0.99) <= 100 ? 'within' : 'OVER');
console.log(`  target 100 ms (p99, result): everything ${verdict(everything.result)}, hang ${verdict(hang.result)}`);

await runner.stop();
await runnerTransport.close();
await transport.close();
rmSync(cwd, { recursive: true, force: true });
execSync(`redis-cli -u ${redisUrl} --scan --pattern '${prefix}:*' | xargs -r redis-cli -u ${redisUrl} del > /dev/null`);
