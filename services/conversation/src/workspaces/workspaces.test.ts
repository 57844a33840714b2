import { describe, expect, it } from '@jest/globals';
import fc from 'fast-check';
import { newWorkspaceId, subdirOf, workspaceNameProblem } from './workspaces.ts';

describe('workspace names, ids and directories', () => {
  it('takes lower-case names of up to 63 characters and refuses the rest', () => {
    for (const ok of ['default', 'a', 'my-app', 'web_2.0', '0x'.padEnd(63, 'z')]) expect(workspaceNameProblem(ok)).toBeNull();
    for (const bad of ['', 'My', '-x', '.hidden', 'a/b', 'a b', '../x', 'x'.repeat(64), 'é'])
      expect(workspaceNameProblem(bad)).toMatch(/is not valid: use 1 to 63 characters/);
  });

  it('makes ids the storage accepts', () => {
    for (let i = 0; i < 100; i++) expect(newWorkspaceId()).toMatch(/^ws-[0-9a-z]{26}$/);
  });

  it('keeps a relative directory inside the workspace', () => {
    expect(subdirOf('')).toEqual({ dir: '' });
    expect(subdirOf('.')).toEqual({ dir: '' });
    expect(subdirOf('./src//app/')).toEqual({ dir: 'src/app' });
    expect(subdirOf('/etc')).toEqual({ problem: expect.stringContaining('absolute') });
    expect(subdirOf('a/../../b')).toEqual({ problem: expect.stringContaining("leaves the workspace ('..')") });
    expect(subdirOf('a\0b')).toEqual({ problem: expect.stringContaining('NUL') });
  });

  it('never answers a directory that climbs out or is absolute (property)', () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom('a', '..', '.', '', 'b c', '/', 'x/y'), { maxLength: 8 }), (parts) => {
        const result = subdirOf(parts.join('/'));
        if ('dir' in result) {
          expect(result.dir.startsWith('/')).toBe(false);
          expect(result.dir.split('/')).not.toContain('..');
        }
      }),
    );
  });
});
