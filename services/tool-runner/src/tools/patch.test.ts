import { describe, it, expect, afterAll } from '@jest/globals';
import { existsSync, mkdirSync, readFileSync, readdirSync, statSync, symlinkSync, writeFileSync, chmodSync, chownSync } from 'node:fs';
import { join } from 'node:path';
import { PATCH_RESTRICTED_ERROR } from '@bedrock/contracts';
import { runPatch } from './patch.ts';
import type { PatchInput } from './patch.ts';
import { applyPatches } from './patch-text.ts';
import { tempDir, TOOL_UID } from '../../test/support.ts';

const dir = tempDir('bedrock-patch-');
afterAll(() => dir.remove());

function file(name: string, text: string): string {
  const path = join(dir.path, name);
  writeFileSync(path, text);
  return path;
}

const patch = (input: PatchInput) => runPatch(input, { cwd: dir.path, mode: 'unrestricted' });

describe('patch', () => {
  it('replaces a unique match and shows a unified diff', async () => {
    const path = file('a.txt', 'one\ntwo\nthree\n');
    const r = await patch({ path: 'a.txt', patches: [{ operation: 'replace', old_text: 'two', new_text: 'TWO' }] });
    expect(r.isError).toBe(false);
    expect(readFileSync(path, 'utf8')).toBe('one\nTWO\nthree\n');
    expect(r.content).toContain('Patched a.txt (1 patch).');
    expect(r.content).toContain('--- a/a.txt\n+++ b/a.txt');
    expect(r.content).toContain('-two\n+TWO');
    expect(r.display).toMatchObject({ path: 'a.txt', created: false });
  });

  it('refuses an ambiguous match and leaves the file unchanged', async () => {
    const path = file('amb.txt', 'x = 1\ny = 2\nx = 1\n');
    const r = await patch({ path: 'amb.txt', patches: [{ operation: 'replace', old_text: 'x = 1', new_text: 'x = 3' }] });
    expect(r.isError).toBe(true);
    expect(r.content).toBe(
      'old_text matches 2 places in amb.txt (lines 1, 3). Include more surrounding lines so it matches exactly once. The file was not changed.',
    );
    expect(readFileSync(path, 'utf8')).toBe('x = 1\ny = 2\nx = 1\n');
  });

  it('refuses a missing match', async () => {
    file('miss.txt', 'alpha\n');
    const r = await patch({ path: 'miss.txt', patches: [{ operation: 'replace', old_text: 'beta', new_text: 'gamma' }] });
    expect(r.isError).toBe(true);
    expect(r.content).toContain('old_text was not found in miss.txt');
  });

  it('is all or nothing: one failing patch leaves the file exactly as it was', async () => {
    const path = file('atomic.txt', 'a\nb\nc\n');
    const before = statSync(path).mtimeMs;
    const r = await patch({
      path: 'atomic.txt',
      patches: [
        { operation: 'replace', old_text: 'a', new_text: 'A' },
        { operation: 'append_eof', new_text: 'd\n' },
        { operation: 'replace', old_text: 'zzz', new_text: 'Z' },
      ],
    });
    expect(r.isError).toBe(true);
    expect(r.content).toContain('patch 3: old_text was not found');
    expect(readFileSync(path, 'utf8')).toBe('a\nb\nc\n');
    expect(statSync(path).mtimeMs).toBe(before);
    expect(readdirSync(dir.path).filter((n) => n.includes('.tmp'))).toEqual([]);
  });

  it('applies every patch against the original text', async () => {
    const path = file('multi.txt', 'head\nmiddle\ntail\n');
    const r = await patch({
      path: 'multi.txt',
      patches: [
        { operation: 'replace', old_text: 'tail', new_text: 'TAIL' },
        { operation: 'replace', old_text: 'head', new_text: 'HEAD\ntail' },
        { operation: 'prepend_bof', new_text: '# top' },
        { operation: 'append_eof', new_text: '# bottom\n' },
      ],
    });
    expect(r.isError).toBe(false);
    // The second patch inserts "tail", which the first patch (against the original) does not see.
    expect(readFileSync(path, 'utf8')).toBe('# top\nHEAD\ntail\nmiddle\nTAIL\n# bottom\n');
  });

  it('refuses overlapping replaces', async () => {
    file('overlap.txt', 'abcdef\n');
    const r = await patch({
      path: 'overlap.txt',
      patches: [
        { operation: 'replace', old_text: 'abcd', new_text: 'x' },
        { operation: 'replace', old_text: 'cdef', new_text: 'y' },
      ],
    });
    expect(r.isError).toBe(true);
    expect(r.content).toContain('overlapping');
  });

  it('retries ignoring whitespace, re-indenting to the file', async () => {
    const path = file('ws.py', 'def f():\n    if x:\n        return 1\n    return 2\n');
    const r = await patch({
      path: 'ws.py',
      patches: [{ operation: 'replace', old_text: 'if x:\n    return 1\n', new_text: 'if y:\n    return 3\n' }],
    });
    expect(r.isError).toBe(false);
    expect(readFileSync(path, 'utf8')).toBe('def f():\n    if y:\n        return 3\n    return 2\n');
    expect(r.content).toContain('only when ignoring whitespace differences');
  });

  it('creates a new file and its parent directories with overwrite', async () => {
    const r = await patch({ path: 'new/deep/file.txt', patches: [{ operation: 'overwrite', new_text: 'hello\n' }] });
    expect(r.isError).toBe(false);
    expect(readFileSync(join(dir.path, 'new/deep/file.txt'), 'utf8')).toBe('hello\n');
    expect(r.content).toContain('Created new/deep/file.txt');
    expect(r.content).toContain('--- /dev/null');
  });

  it('refuses to edit a missing file except with overwrite', async () => {
    const r = await patch({ path: 'nope.txt', patches: [{ operation: 'append_eof', new_text: 'x' }] });
    expect(r.content).toContain('nope.txt does not exist. Use the overwrite operation to create it.');
    expect(existsSync(join(dir.path, 'nope.txt'))).toBe(false);
  });

  it('keeps the file mode and accepts absolute paths', async () => {
    const path = file('script.sh', 'echo a\n');
    chmodSync(path, 0o755);
    const r = await patch({ path, patches: [{ operation: 'replace', old_text: 'a', new_text: 'b' }] });
    expect(r.isError).toBe(false);
    expect(statSync(path).mode & 0o777).toBe(0o755);
  });

  it('refuses a binary file', async () => {
    const path = join(dir.path, 'blob.bin');
    writeFileSync(path, Buffer.from([0x61, 0x00, 0xff, 0x62]));
    const r = await patch({ path: 'blob.bin', patches: [{ operation: 'append_eof', new_text: 'x' }] });
    expect(r.isError).toBe(true);
    expect(r.content).toContain('binary file');
    expect(readFileSync(path)).toEqual(Buffer.from([0x61, 0x00, 0xff, 0x62]));
  });

  it('refuses in Restricted mode with the REQ-PATCH-009 message, touching nothing', async () => {
    const path = file('ro.txt', 'keep\n');
    const r = await runPatch(
      { path: 'ro.txt', patches: [{ operation: 'overwrite', new_text: 'gone' }] },
      { cwd: dir.path, mode: 'restricted' },
    );
    expect(r).toMatchObject({ isError: true, content: PATCH_RESTRICTED_ERROR });
    expect(readFileSync(path, 'utf8')).toBe('keep\n');
  });
});

describe('patch stays inside the working directory (both modes)', () => {
  const outside = tempDir('bedrock-patch-outside-');
  afterAll(() => outside.remove());
  const secret = join(outside.path, 'secret.txt');

  const refused = async (path: string, mode: 'restricted' | 'unrestricted' = 'unrestricted') => {
    writeFileSync(secret, 'keep\n');
    const r = await runPatch({ path, patches: [{ operation: 'overwrite', new_text: 'owned' }] }, { cwd: dir.path, mode });
    expect(r.isError).toBe(true);
    expect(readFileSync(secret, 'utf8')).toBe('keep\n');
    return r;
  };

  it('refuses .. paths, absolute paths and symlinks that lead out, and a new file under an escaping link', async () => {
    expect((await refused(`../${outside.path.split('/').pop()}/secret.txt`)).content).toMatch(
      /is outside the working directory .* patch edits files under it only/,
    );
    expect((await refused(secret)).content).toContain('is outside the working directory');
    symlinkSync(secret, join(dir.path, 'link-out.txt'));
    expect((await refused('link-out.txt')).content).toContain('is outside the working directory');
    symlinkSync(outside.path, join(dir.path, 'dir-out'));
    const r = await runPatch(
      { path: 'dir-out/new/created.txt', patches: [{ operation: 'overwrite', new_text: 'x' }] },
      { cwd: dir.path, mode: 'unrestricted' },
    );
    expect(r.content).toContain('is outside the working directory');
    expect(existsSync(join(outside.path, 'new'))).toBe(false);
    expect((await refused(secret, 'restricted')).content).toBe(PATCH_RESTRICTED_ERROR);
  });

  it('edits a symlink target that stays inside', async () => {
    file('real.txt', 'a\n');
    symlinkSync(join(dir.path, 'real.txt'), join(dir.path, 'link-in.txt'));
    const r = await patch({ path: 'link-in.txt', patches: [{ operation: 'replace', old_text: 'a', new_text: 'b' }] });
    expect(r.isError).toBe(false);
    expect(readFileSync(join(dir.path, 'real.txt'), 'utf8')).toBe('b\n');
  });

  it('as the tool user: new files and directories are its own, and a file it may not write is refused', async () => {
    const ctx = { cwd: dir.path, mode: 'unrestricted' as const, sandbox: { toolUser: { uid: TOOL_UID, gid: TOOL_UID } } };
    const created = await runPatch({ path: 'made/deep/new.txt', patches: [{ operation: 'overwrite', new_text: 'x' }] }, ctx);
    expect(created.isError).toBe(false);
    for (const p of ['made', 'made/deep', 'made/deep/new.txt']) expect(statSync(join(dir.path, p)).uid).toBe(TOOL_UID);
    const rootOnly = file('root-only.txt', 'keep\n');
    chownSync(rootOnly, 0, 0);
    chmodSync(rootOnly, 0o644);
    const r = await runPatch({ path: 'root-only.txt', patches: [{ operation: 'append_eof', new_text: 'more' }] }, ctx);
    expect(r.content).toContain(`permission denied for the tool user (uid ${TOOL_UID})`);
    expect(readFileSync(rootOnly, 'utf8')).toBe('keep\n');
    mkdirSync(join(dir.path, 'locked'));
    chownSync(join(dir.path, 'locked'), 0, 0);
    chmodSync(join(dir.path, 'locked'), 0o755);
    expect((await runPatch({ path: 'locked/x.txt', patches: [{ operation: 'overwrite', new_text: 'x' }] }, ctx)).isError).toBe(true);
    expect(existsSync(join(dir.path, 'locked/x.txt'))).toBe(false);
  });
});

describe('applyPatches', () => {
  it('overwrite must be alone', () => {
    const r = applyPatches(
      'x',
      [
        { operation: 'overwrite', new_text: 'a' },
        { operation: 'append_eof', new_text: 'b' },
      ],
      'f',
    );
    expect(r.ok).toBe(false);
  });

  it('refuses a whitespace-tolerant match that is not unique', () => {
    const r = applyPatches('  a\n  b\n\n    a\n    b\n', [{ operation: 'replace', old_text: 'a\nb', new_text: 'c' }], 'f');
    expect(r).toEqual({ ok: false, error: expect.stringContaining('ignoring whitespace it matches 2 places') });
  });

  it('appends on a new line when the file does not end with one', () => {
    expect(applyPatches('a', [{ operation: 'append_eof', new_text: 'b' }], 'f')).toEqual({ ok: true, text: 'a\nb', notes: [] });
  });
});
