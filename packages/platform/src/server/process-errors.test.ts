import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';

const here = path.dirname(fileURLToPath(import.meta.url));
const ROOT = path.resolve(here, '../../../..');

/** Runs the fixture to its end; its stdout and stderr. */
function run(mode: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'testdata', 'process-errors-fixture.ts')], {
    cwd: ROOT,
    env: { ...process.env, FIXTURE_MODE: mode },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  return new Promise((resolve) => child.once('close', (code) => resolve({ code, stdout, stderr })));
}

describe('logProcessErrors', () => {
  it.each([
    ['throw', 'uncaught exception: exiting', 'boom in a callback'],
    ['reject', 'unhandled promise rejection: exiting', 'lost promise'],
  ])(
    '%s: one fatal JSON line with the error, exit 1, nothing raw on stderr',
    async (mode, msg, message) => {
      const { code, stdout, stderr } = await run(mode);
      expect(code).toBe(1);
      const lines = stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { level: string; msg: string; err: { message: string; stack: string } });
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ level: 'fatal', msg, err: { message } });
      expect(lines[0]!.err.stack).toContain(message);
      expect(stderr.replace(/.*ExperimentalWarning.*\n?|.*--trace-warnings.*\n?/g, '')).toBe('');
    },
    30_000,
  );
});
