/**
 * `npm start`'s banner prints a `bedrock` command to try (scripts/start.ts): it must work as
 * printed, pasted into a shell in another directory, with a data directory other than the
 * default (the CLI finds the token through BEDROCK_DATA_DIR) and the CLI not installed.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, expect, it } from '@jest/globals';

const dirs: string[] = [];
let product: ChildProcess | undefined;
afterAll(async () => {
  if (product && product.exitCode === null) {
    const exited = new Promise((r) => product!.once('exit', r));
    product.kill('SIGTERM');
    await exited;
  }
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const mkdir = (prefix: string) => {
  const d = mkdtempSync(join(tmpdir(), prefix));
  chmodSync(d, 0o755);
  dirs.push(d);
  return d;
};

it("the banner's Try line runs as printed, with a custom BEDROCK_DATA_DIR, from another directory", async () => {
  const dataDir = mkdir('bedrock-banner-data-');
  const home = mkdir('bedrock-banner-home-');
  const elsewhere = mkdir('bedrock-banner-cwd-');
  // Node on the PATH, not the workspace's node_modules/.bin: `bedrock` is not installed.
  const path = `${dirname(process.execPath)}:/usr/bin:/bin`;
  product = spawn(process.execPath, ['--import', 'tsx', resolve('scripts/start.ts')], {
    env: {
      PATH: path,
      HOME: home,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      LOG_LEVEL: 'warn',
    },
    cwd: resolve('.'),
  });
  let banner = '';
  product.stdout!.on('data', (d: Buffer) => (banner += d.toString()));
  product.stderr!.resume();
  const until = Date.now() + 60_000;
  while (!banner.includes('Press Ctrl-C to stop.')) {
    if (Date.now() > until || product.exitCode !== null) throw new Error(`no banner: ${banner}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  const tryLine = /^ {2}Try: {6}(.*)$/m.exec(banner)?.[1];
  expect(tryLine).toContain(`BEDROCK_DATA_DIR=${dataDir}`);
  expect(banner).toContain('npm install -g ./apps/cli');
  // Pasted into a shell whose environment knows nothing of the product.
  const ran = await new Promise<{ code: number; stdout: string; stderr: string }>((done) =>
    execFile('bash', ['-c', tryLine!], { env: { PATH: path, HOME: home }, cwd: elsewhere, timeout: 60_000 }, (err, stdout, stderr) =>
      done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    ),
  );
  expect(ran.stderr).not.toMatch(/Unauthenticated/);
  expect(ran).toMatchObject({ code: 0, stdout: expect.stringContaining('⏺ bash {"command":"ls"}') });
}, 120_000);
