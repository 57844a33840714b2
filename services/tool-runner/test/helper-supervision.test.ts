/** The helper as a supervisor: it reports the command's group, and takes the tree down when its runner dies. */
import { describe, it, expect } from '@jest/globals';
import { spawn } from 'node:child_process';
import { ensureHelper } from './support.ts';

function alive(pgid: number): boolean {
  try {
    process.kill(-pgid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('bedrock-sandbox supervision', () => {
  it('kills the command tree when the runner that started it dies', async () => {
    const helper = ensureHelper();
    // A stand-in runner: a shell that starts the helper and is then SIGKILLed.
    const runner = spawn('bash', ['-c', `"${helper}" -- bash -c 'echo "pgid=$$"; sleep 60 & (sleep 60 & sleep 60) & wait' & wait`], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const pgid = await new Promise<number>((resolve) => {
      let text = '';
      runner.stdout.on('data', (chunk: Buffer) => {
        text += chunk.toString();
        const m = /pgid=(\d+)/.exec(text);
        if (m) resolve(Number(m[1]));
      });
    });
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(alive(pgid)).toBe(true);
    runner.kill('SIGKILL');
    const deadline = Date.now() + 3000;
    while (alive(pgid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(alive(pgid)).toBe(false);
  });
});
