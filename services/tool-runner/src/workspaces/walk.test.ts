import { afterAll, describe, expect, it } from '@jest/globals';
import { linkSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { walk } from './walk.ts';

const dir = mkdtempSync(join(tmpdir(), 'bedrock-walk-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('walk', () => {
  it('counts every entry and the bytes on disk, hard links once, never following a symlink', async () => {
    const top = join(dir, 'ws');
    mkdirSync(join(top, 'a', 'b'), { recursive: true });
    writeFileSync(join(top, 'a', 'b', 'f'), Buffer.alloc(64 * 1024, 1));
    linkSync(join(top, 'a', 'b', 'f'), join(top, 'hard'));
    symlinkSync('/usr', join(top, 'usr'));
    symlinkSync(top, join(top, 'a', 'loop'));
    const result = await walk(top, { bytes: true, maxEntries: 1000, deadline: Date.now() + 5000 });
    // top, a, a/b, a/b/f, hard, usr, a/loop
    expect(result).toMatchObject({ entries: 7, complete: true });
    expect(result.bytes).toBeGreaterThanOrEqual(64 * 1024);
    expect(result.bytes).toBeLessThan(3 * 64 * 1024);
    expect(await walk(top, { bytes: false, maxEntries: 1000, deadline: Date.now() + 5000 })).toEqual({
      entries: 7,
      bytes: 0,
      complete: true,
    });
  });

  it('stops at its bound and says the figures are lower bounds', async () => {
    const top = join(dir, 'many');
    mkdirSync(top);
    for (let i = 0; i < 50; i++) writeFileSync(join(top, `f${i}`), '');
    expect(await walk(top, { bytes: false, maxEntries: 10, deadline: Date.now() + 5000 })).toEqual({
      entries: 10,
      bytes: 0,
      complete: false,
    });
  });
});
