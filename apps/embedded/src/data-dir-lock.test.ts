/**
 * One process per data directory: a second holder is refused with the directory named, the lock
 * goes with unlock, and a lock left by a process that died (killed -9) is taken over once stale.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { DataDirInUseError, lockDataDir } from './data-dir-lock.ts';

const dir = mkdtempSync(join(tmpdir(), 'bedrock-data-lock-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('lockDataDir', () => {
  it('refuses a second holder, naming the directory and the way out; frees it on unlock', async () => {
    const unlock = await lockDataDir(dir, () => undefined);
    const second = lockDataDir(dir, () => undefined);
    await expect(second).rejects.toBeInstanceOf(DataDirInUseError);
    await expect(second).rejects.toThrow(`another Bedrock is running with its data in ${dir}`);
    await expect(second).rejects.toThrow(/BEDROCK_DATA_DIR=/);
    await unlock();
    const again = await lockDataDir(dir, () => undefined);
    await again();
  });

  it('takes over the lock of a process killed -9 once it is stale (10 s)', async () => {
    const own = mkdtempSync(join(dir, 'killed-'));
    const module = fileURLToPath(new URL('./data-dir-lock.ts', import.meta.url));
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        '-e',
        `import(${JSON.stringify(module)}).then((m) => m.lockDataDir(${JSON.stringify(own)}, () => {})).then(() => { console.log('locked'); setInterval(() => {}, 1000); })`,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    await new Promise<void>((resolve) => child.stdout!.on('data', (d: Buffer) => d.toString().includes('locked') && resolve()));
    await expect(lockDataDir(own, () => undefined)).rejects.toBeInstanceOf(DataDirInUseError);
    child.kill('SIGKILL');
    await new Promise((r) => child.once('exit', r));
    const started = Date.now();
    let unlock: (() => Promise<void>) | undefined;
    while (!unlock && Date.now() - started < 20_000) {
      unlock = await lockDataDir(own, () => undefined).catch(() => undefined);
      if (!unlock) await new Promise((r) => setTimeout(r, 500));
    }
    expect(unlock).toBeDefined();
    await unlock!();
  }, 30_000);
});
