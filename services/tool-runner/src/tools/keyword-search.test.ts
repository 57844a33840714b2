import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Mode } from '@bedrock/contracts';
import { executeTool } from './execute-tool.ts';
import type { SandboxSettings } from '../sandbox/sandbox-settings.ts';
import { executeContext, tempDir, testSandboxSettings } from '../../test/support.ts';
import { closeSandboxSettings } from '../sandbox/sandbox-settings.ts';

let sandbox: SandboxSettings;
const repo = tempDir('bedrock-search-');

beforeAll(async () => {
  sandbox = await testSandboxSettings();
  mkdirSync(join(repo.path, 'src/deep'), { recursive: true });
  writeFileSync(join(repo.path, 'src/deep/a.ts'), 'line one\nconst NeedleValue = 1;\nline three\n');
  writeFileSync(join(repo.path, 'common.txt'), Array.from({ length: 3000 }, (_, i) => `the word ${i}`).join('\n'));
  writeFileSync(join(repo.path, '.gitignore'), 'ignored.txt\n');
  writeFileSync(join(repo.path, 'ignored.txt'), 'needlevalue in an ignored file\n');
  execFileSync('git', ['init', '-q'], { cwd: repo.path });
});
afterAll(async () => {
  repo.remove();
  await closeSandboxSettings(sandbox);
});

async function search(terms: string[], cwd = repo.path, mode = Mode.RESTRICTED) {
  return executeTool(
    { toolName: 'keyword_search', inputJson: JSON.stringify({ query: 'find things', search_terms: terms }), cwd, mode },
    executeContext(sandbox),
  );
}

describe('keyword_search', () => {
  it('searches case-insensitively from the repository root with context, respecting .gitignore', async () => {
    const r = await search(['needlevalue', 'absent-term-xyz'], join(repo.path, 'src/deep'));
    expect(r.isError).toBe(false);
    expect(r.content).toContain(`Searched ${repo.path} for: find things`);
    expect(r.content).toContain('== "needlevalue": 1 matching line');
    expect(r.content).toContain('src/deep/a.ts:2:const NeedleValue = 1;');
    expect(r.content).toContain('src/deep/a.ts-1-line one');
    expect(r.content).not.toContain('ignored.txt');
    expect(r.content).toContain('== "absent-term-xyz": no matches.');
  });

  it('drops a term with too many matches and keeps the others', async () => {
    const r = await search(['the word', 'needlevalue']);
    expect(r.content).toMatch(/== "the word": dropped, too many matches/);
    expect(r.content).toContain('const NeedleValue');
    expect(r.content.length).toBeLessThan(70_000);
  });

  it('searches the working directory outside a repository', async () => {
    const plain = tempDir('bedrock-search-plain-');
    writeFileSync(join(plain.path, 'f.txt'), 'Hello World\n');
    const r = await search(['hello'], plain.path, Mode.UNRESTRICTED);
    expect(r.content).toContain('./f.txt:1:Hello World');
    plain.remove();
  });
});
