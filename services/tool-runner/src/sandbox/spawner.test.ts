import { describe, it, expect, afterEach } from '@jest/globals';
import type { Socket } from 'node:net';
import { createSpawner, type SpawnedHelper, type Spawner } from './spawner.ts';

let spawner: Spawner | undefined;
afterEach(async () => {
  await spawner?.close();
  spawner = undefined;
});

function collect(socket: Socket | null): () => string {
  let text = '';
  socket?.on('data', (chunk: Buffer) => (text += chunk.toString('utf8')));
  return () => text;
}

function exited(helper: SpawnedHelper): Promise<[number | null, NodeJS.Signals | null]> {
  if (helper.exitCode !== null || helper.signalCode !== null) return Promise.resolve([helper.exitCode, helper.signalCode]);
  return new Promise((resolve) => helper.once('exit', (code, signal) => resolve([code, signal])));
}

function closed(socket: Socket | null): Promise<void> {
  return new Promise((resolve) => (socket && !socket.closed ? socket.once('close', () => resolve()) : resolve()));
}

/** Says "ready" on fd 3 at once (before its pipes reach this process), then copies fd 4 to stdout. */
const ECHO = ['-c', 'printf "ready\\n" >&3; cat <&4; echo "to stderr" >&2; exit 3'];

describe('the spawner process', () => {
  it("hands back the helper's four pipes without losing a byte, and reports its exit", async () => {
    spawner = createSpawner();
    const helper = await spawner.spawn('/bin/sh', ECHO, { cwd: '/', env: { PATH: '/usr/bin:/bin' } });
    expect(helper.pid).toBeGreaterThan(0);
    expect(helper.pid).not.toBe(spawner.pid);
    const out = collect(helper.stdout);
    const err = collect(helper.stderr);
    const report = collect(helper.stdio[3]);
    helper.stdio[4]?.end('the run\n');
    expect(await exited(helper)).toEqual([3, null]);
    await Promise.all([closed(helper.stdout), closed(helper.stderr)]);
    expect(report()).toBe('ready\n');
    expect(out()).toBe('the run\n');
    expect(err()).toBe('to stderr\n');
  });

  it('runs many helpers at once, each with its own pipes', async () => {
    spawner = createSpawner();
    const helpers = await Promise.all(
      Array.from({ length: 12 }, () => spawner!.spawn('/bin/sh', ECHO, { cwd: '/', env: { PATH: '/usr/bin:/bin' } })),
    );
    const outs = helpers.map((h) => collect(h.stdout));
    helpers.forEach((h, i) => h.stdio[4]?.end(`run ${i}\n`));
    expect((await Promise.all(helpers.map(exited))).every(([code]) => code === 3)).toBe(true);
    await Promise.all(helpers.map((h) => closed(h.stdout)));
    expect(outs.map((o) => o())).toEqual(helpers.map((_, i) => `run ${i}\n`));
    expect(spawner.starts).toBe(1);
  });

  it('forwards kills to the helper', async () => {
    spawner = createSpawner();
    const helper = await spawner.spawn('/bin/sh', ECHO, { cwd: '/', env: { PATH: '/usr/bin:/bin' } });
    expect(helper.kill('SIGKILL')).toBe(true);
    expect(await exited(helper)).toEqual([null, 'SIGKILL']);
  });

  it('fails a request for a program that does not exist, and goes on serving', async () => {
    spawner = createSpawner();
    await expect(spawner.spawn('/nonexistent/helper', [], { cwd: '/', env: {} })).rejects.toThrow(
      /could not start the sandbox helper: .*ENOENT/,
    );
    const helper = await spawner.spawn('/bin/sh', ECHO, { cwd: '/', env: { PATH: '/usr/bin:/bin' } });
    helper.stdio[4]?.end();
    expect(await exited(helper)).toEqual([3, null]);
  });

  it('is started again after it died, and reports the helpers it started as killed', async () => {
    spawner = createSpawner();
    const helper = await spawner.spawn('/bin/sh', ECHO, { cwd: '/', env: { PATH: '/usr/bin:/bin' } });
    const first = spawner.pid!;
    process.kill(first, 'SIGKILL');
    expect(await exited(helper)).toEqual([null, 'SIGKILL']);
    helper.kill('SIGKILL');
    // The orphan waits on fd 4 until this process lets go of it.
    helper.stdio[4]?.destroy();
    const next = await spawner.spawn('/bin/sh', ECHO, { cwd: '/', env: { PATH: '/usr/bin:/bin' } });
    expect(spawner.starts).toBe(2);
    expect(spawner.pid).not.toBe(first);
    const out = collect(next.stdout);
    next.stdio[4]?.end('again\n');
    expect(await exited(next)).toEqual([3, null]);
    await closed(next.stdout);
    expect(out()).toBe('again\n');
  });
});
