import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { health as pb } from '@bedrock/contracts';
import { onShutdown } from './shutdown.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../../../..');

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));
async function until(check: () => boolean, ms = 15_000): Promise<void> {
  for (const started = Date.now(); !check(); await sleep(10)) {
    if (Date.now() - started > ms) throw new Error('condition not met in time');
  }
}

/** Starts a TypeScript fixture in a real child process and collects its JSON log lines. */
async function startFixture(file: string, env: Record<string, string>) {
  // Plain node with tsx as a loader, not the tsx CLI: the CLI is a parent process that relays
  // signals and may exit 128+signo on its own when the machine is busy.
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'testdata', file)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const lines: Record<string, unknown>[] = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  createInterface({ input: child.stdout }).on('line', (line) => lines.push(JSON.parse(line) as Record<string, unknown>));
  await until(() => lines.some((l) => l.msg === 'ready'), 20_000);
  return { child, lines, exited, msgs: () => lines.map((l) => l.msg) };
}

// Signals are tested on child processes: Jest gives test files a copy of `process`, so a
// listener registered in the test would not see a real signal.
describe('onShutdown on real signals', () => {
  it('runs the handler once and exits 0 when it finishes', async () => {
    const f = await startFixture('shutdown-fixture.ts', { FIXTURE_MODE: 'ok' });
    f.child.kill('SIGTERM');
    expect(await f.exited).toEqual({ code: 0, signal: null });
    expect(f.msgs()).toEqual(['ready', 'shutting down', 'handler started', 'shutdown complete']);
    expect(f.lines[1]).toMatchObject({ signal: 'SIGTERM', grace_ms: 300 });
  }, 30_000);

  it('exits 1 when the handler throws', async () => {
    const f = await startFixture('shutdown-fixture.ts', { FIXTURE_MODE: 'throw' });
    f.child.kill('SIGINT');
    expect(await f.exited).toEqual({ code: 1, signal: null });
    expect(f.lines.at(-1)).toMatchObject({ level: 'error', msg: 'shutdown failed', err: { message: 'db close failed' } });
  }, 30_000);

  it('exits 1 when the handler overruns the grace period', async () => {
    const f = await startFixture('shutdown-fixture.ts', { FIXTURE_MODE: 'hang' });
    const started = Date.now();
    f.child.kill('SIGTERM');
    expect(await f.exited).toEqual({ code: 1, signal: null });
    expect(Date.now() - started).toBeLessThan(5000);
    expect(f.msgs().at(-1)).toBe('shutdown overran its grace period: exiting anyway');
  }, 30_000);

  it('exits at once with 128+signo on a second signal', async () => {
    const f = await startFixture('shutdown-fixture.ts', { FIXTURE_MODE: 'slow' });
    f.child.kill('SIGTERM');
    await until(() => f.msgs().includes('handler started'));
    f.child.kill('SIGINT');
    expect(await f.exited).toEqual({ code: 128 + constants.signals.SIGINT, signal: null });
    expect(f.msgs()).not.toContain('shutdown complete');
  }, 30_000);

  it('removes its listeners when disposed', () => {
    const before = process.listenerCount('SIGUSR2');
    const dispose = onShutdown(() => undefined, { signals: ['SIGUSR2'] });
    expect(process.listenerCount('SIGUSR2')).toBe(before + 1);
    dispose();
    expect(process.listenerCount('SIGUSR2')).toBe(before);
  });
});

describe('a thin main.ts on SIGTERM', () => {
  it('turns NOT_SERVING, ends watches, closes its servers and exits 0', async () => {
    const f = await startFixture('main-fixture.ts', { LOG_LEVEL: 'info', BEDROCK_METRICS_PORT: '0', BEDROCK_SHUTDOWN_GRACE: '500ms' });
    const ready = f.lines.find((l) => l.msg === 'ready') as { grpc_port: number; metrics_port: number };

    expect((await fetch(`http://127.0.0.1:${ready.metrics_port}/readyz`)).status).toBe(200);
    const client = createClient(pb.Health, createGrpcTransport({ baseUrl: `http://127.0.0.1:${ready.grpc_port}` }));
    const seen: pb.HealthCheckResponse_ServingStatus[] = [];
    const watched = (async () => {
      for await (const res of client.watch({})) seen.push(res.status);
    })().then(
      () => undefined,
      (e: unknown) => ConnectError.from(e),
    );
    await until(() => seen.length === 1);

    f.child.kill('SIGTERM');
    expect(await f.exited).toEqual({ code: 0, signal: null });
    const watchEnd = await watched;
    expect(seen).toEqual([pb.HealthCheckResponse_ServingStatus.SERVING, pb.HealthCheckResponse_ServingStatus.NOT_SERVING]);
    expect(watchEnd?.code).toBe(Code.Unavailable);
    expect(f.msgs()).toEqual(
      expect.arrayContaining(['grpc server listening', 'ready', 'shutting down', 'grpc server closed', 'shutdown complete']),
    );
    expect(f.lines.every((l) => l.service === 'fixture')).toBe(true);
  }, 30_000);
});
