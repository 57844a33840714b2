/**
 * `make loadtest-tool-runner` (bench/loadtest.ts) as an operator runs it: with no arguments (its
 * own runner, a child process), against a runner given by URL, against nothing, and through
 * Redis as production does. Short runs (the figures' quality is not under test, their presence is).
 */
import { describe, it, expect, afterAll } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { startTestRunner, TEST_SERVICES } from './support-runner.ts';

const SCRIPT = fileURLToPath(new URL('../bench/loadtest.ts', import.meta.url));
const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const dir = mkdtempSync(join(tmpdir(), 'bedrock-loadtest-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

interface Outcome {
  code: number | null;
  stdout: string;
  stderr: string;
}

function loadtest(args: readonly string[]): Promise<Outcome> {
  const env = { ...process.env };
  delete env.BEDROCK_SERVICE_TOKEN_FILE;
  const child = spawn(process.execPath, ['--import', 'tsx', SCRIPT, ...args], { cwd: REPO_ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
}

interface LatencyStats {
  n: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}
interface Report {
  timestamp: string;
  machine: { cpus: number };
  settings: {
    path: string;
    concurrency: number;
    durationS: number;
    warmupS: number;
    mix: Record<string, number>;
    runner: { startedHere: boolean; build?: string; pid: number | null; settings?: Record<string, string> };
    runnerId: string | null;
  };
  completed: number;
  elapsedS: number;
  throughputPerS: number;
  latencyMs: { all: LatencyStats; byTool: Record<string, LatencyStats> };
  errors: { total: number; byKind: Record<string, number> };
  runnerResources: {
    pid: number;
    cpu: { totalS: number; percentOfOneCore: number };
    toolsCpu: { totalS: number };
    peakRssBytes: number;
  } | null;
}

const readReport = (file: string) => JSON.parse(readFileSync(file, 'utf8')) as Report;

function expectFigures(report: Report): void {
  expect(Date.now() - Date.parse(report.timestamp)).toBeLessThan(120_000);
  expect(report.machine.cpus).toBe(cpus().length);
  expect(report.completed).toBeGreaterThan(0);
  expect(report.throughputPerS).toBeCloseTo(report.completed / report.elapsedS, 1);
  const all = report.latencyMs.all;
  expect(all.n).toBe(report.completed);
  expect(all.p50).toBeGreaterThan(0);
  expect(all.p50).toBeLessThanOrEqual(all.p90);
  expect(all.p90).toBeLessThanOrEqual(all.p99);
  expect(all.p99).toBeLessThanOrEqual(all.max);
  expect(report.errors).toMatchObject({ total: 0, byKind: {} });
}

describe('make loadtest-tool-runner', () => {
  it('with no arguments starts its own runner, prints throughput, latency, errors, CPU and memory, and writes the report', async () => {
    const reportFile = join(dir, 'own.json');
    const { code, stdout, stderr } = await loadtest(['--duration', '2', '--warmup', '0.5', '--report', reportFile]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toMatch(/started here \(production bundle, pid \d+, default settings\)/);
    expect(stdout).toMatch(/throughput: \d+ runs in [\d.]+ s = [\d.]+ runs\/s/);
    expect(stdout).toMatch(/ {2}all +n=\d+ +p50 [\d.]+ ms +p90 [\d.]+ ms +p99 [\d.]+ ms +max [\d.]+ ms/);
    expect(stdout).toMatch(/^errors: none$/m);
    expect(stdout).toMatch(/CPU: runner process [\d.]+ s \(user [\d.]+ \+ system [\d.]+\) = [\d.]+% of one core/);
    expect(stdout).toMatch(/memory: peak RSS [\d.]+ MiB/);

    const report = readReport(reportFile);
    expectFigures(report);
    expect(report.settings).toMatchObject({ path: 'grpc', concurrency: 8, durationS: 2, warmupS: 0.5, mix: { bash: 8, think: 2 } });
    expect(report.settings.runner).toMatchObject({
      startedHere: true,
      build: 'bundle',
      settings: { BEDROCK_GRPC_PORT: '0', BEDROCK_HOST: '127.0.0.1' },
    });
    const resources = report.runnerResources!;
    expect(resources.pid).toBe(report.settings.runner.pid);
    expect(resources.cpu.totalS).toBeGreaterThan(0);
    expect(resources.toolsCpu.totalS).toBeGreaterThan(0);
    expect(resources.peakRssBytes).toBeGreaterThan(20 * 1024 * 1024);
    // The runner it started is gone.
    expect(existsSync(`/proc/${resources.pid}`)).toBe(false);
  }, 90_000);

  it('--url drives a runner already running, with a token it lists as a peer', async () => {
    const runner = await startTestRunner();
    try {
      const tokenFile = join(dir, 'conversation.token');
      writeFileSync(tokenFile, `${TEST_SERVICES.tokens.conversation}\n`, { mode: 0o600 });
      const reportFile = join(dir, 'url.json');
      const args = ['--url', runner.grpcUrl, '--token-file', tokenFile, '--duration', '1', '--warmup', '0', '--concurrency', '2'];
      const { code, stdout, stderr } = await loadtest([...args, '--mix', 'think:1,keyword_search:1', '--report', reportFile]);
      expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
      expect(stdout).toMatch(/runner CPU and memory: not measured/);
      const report = readReport(reportFile);
      expectFigures(report);
      expect(report.settings.runner).toMatchObject({ startedHere: false, url: runner.grpcUrl });
      expect(report.settings.runnerId).toBe(runner.capabilities().runnerId);
      expect(Object.keys(report.latencyMs.byTool).sort()).toEqual(['keyword_search', 'think']);
      expect(report.runnerResources).toBeNull();
    } finally {
      await runner.stop();
    }
  }, 60_000);

  it('an unreachable --url is one line and a non-zero exit', async () => {
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const tokenFile = join(dir, 'any.token');
    writeFileSync(tokenFile, 'some-token\n', { mode: 0o600 });
    const { code, stdout, stderr } = await loadtest(['--url', `http://127.0.0.1:${port}`, '--token-file', tokenFile]);
    expect(code).toBe(1);
    expect(stdout).toBe('');
    expect(stderr.trimEnd().split('\n')).toEqual([
      expect.stringMatching(new RegExp(`^loadtest: no tool-runner answers at http://127\\.0\\.0\\.1:${port} `)),
    ]);
  }, 30_000);

  it('--path queue drives its own runner through Redis and leaves no key behind', async () => {
    const reportFile = join(dir, 'queue.json');
    const args = ['--path', 'queue', '--duration', '2', '--warmup', '0.5', '--runner-build', 'source'];
    const { code, stdout, stderr } = await loadtest([...args, '--report', reportFile]);
    expect({ code, stderr }).toEqual({ code: 0, stderr: '' });
    expect(stdout).toMatch(/queue tool-exec → conversation-events/);
    const report = readReport(reportFile);
    expectFigures(report);
    expect(report.settings.path).toBe('queue');
    expect(stdout).toMatch(/started here \(source through tsx, pid \d+/);
    const prefix = report.settings.runner.settings?.BEDROCK_REDIS_PREFIX;
    expect(prefix).toMatch(/^bedrock-loadtest-/);
    expect(report.runnerResources?.cpu.totalS).toBeGreaterThan(0);
    const redis = new Redis(REDIS_URL);
    try {
      const left: string[] = [];
      let cursor = '0';
      do {
        const [next, keys] = await redis.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        left.push(...keys);
        cursor = next;
      } while (cursor !== '0');
      expect(left).toEqual([]);
    } finally {
      redis.disconnect();
    }
  }, 90_000);
});
