/**
 * A service started without `detached` does not outlive the process that started it, even when
 * that process dies of an uncaught exception; a detached one does. The service here is a stand-in
 * bundle (`<bundleDir>/web-bff/main.js`) that only waits, so it can end only by a signal.
 */
import { describe, it, expect, afterAll } from '@jest/globals';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const dir = mkdtempSync(join(tmpdir(), 'bedrock-service-process-'));
const bundleDir = join(dir, 'bundle');
mkdirSync(join(bundleDir, 'web-bff'), { recursive: true });
writeFileSync(join(bundleDir, 'web-bff', 'main.js'), 'setInterval(() => {}, 1000);\n');
const started: number[] = [];

afterAll(() => {
  for (const pid of started) {
    try {
      process.kill(-pid, 'SIGKILL');
    } catch {
      // gone
    }
  }
  rmSync(dir, { recursive: true, force: true });
});

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Starts a parent that starts the stand-in service, prints its pid, then throws; resolves with the pid once the parent is gone. */
async function serviceOfCrashedParent(detached: boolean): Promise<number> {
  const modulePath = new URL('./service-process.ts', import.meta.url).pathname;
  const script = `
    import { serviceProcess } from ${JSON.stringify(modulePath)};
    const p = serviceProcess(
      { name: 'web-bff-1', service: 'web-bff', env: {}, metricsPort: 1 },
      { dir: ${JSON.stringify(join(dir, String(detached)))}, runtime: 'bundle', bundleDir: ${JSON.stringify(bundleDir)}, detached: ${detached} },
    );
    await p.start();
    console.log('pid', p.pid());
    await new Promise((r) => setTimeout(r, 300));
    if (!p.running()) throw new Error('the stand-in service did not stay up');
    throw new Error('the parent dies');
  `;
  const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let err = '';
  parent.stdout.on('data', (d: Buffer) => (out += d.toString()));
  parent.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const code = await new Promise<number | null>((resolve) => parent.once('exit', resolve));
  const pid = Number(/pid (\d+)/.exec(out)?.[1]);
  expect(err).toContain('the parent dies');
  expect(code).not.toBe(0);
  expect(pid).toBeGreaterThan(0);
  started.push(pid);
  return pid;
}

async function goneWithin(pid: number, ms: number): Promise<boolean> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (!alive(pid)) return true;
    await new Promise((r) => setTimeout(r, 50));
  }
  return !alive(pid);
}

describe('serviceProcess and the process that started it', () => {
  it('ends a service it started (not detached) when it dies of an uncaught exception', async () => {
    const pid = await serviceOfCrashedParent(false);
    expect(await goneWithin(pid, 10_000)).toBe(true);
  }, 60_000);

  it('leaves a detached service running', async () => {
    const pid = await serviceOfCrashedParent(true);
    expect(await goneWithin(pid, 1_000)).toBe(false);
  }, 60_000);
});
