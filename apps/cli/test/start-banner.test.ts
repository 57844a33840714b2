/**
 * `npm start`'s banner prints a `bedrock` command to try (scripts/start.ts): it must work as
 * printed, pasted into a bare shell in another directory, with a data directory other than the
 * default (the CLI finds the token through BEDROCK_DATA_DIR) and the CLI not installed (npm's
 * `node_modules/.bin` is on the PATH of `npm start`, not on the user's). SIGTERM stops it in
 * under 2 s while a watch is open; a busy port is one line naming the setting that moves it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer, type AddressInfo } from 'node:net';
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
  // The user's PATH has Node, not the workspace's node_modules/.bin: `bedrock` is not installed.
  const path = `${dirname(process.execPath)}:/usr/bin:/bin`;
  product = spawn(process.execPath, ['--import', 'tsx', resolve('scripts/start.ts')], {
    env: {
      // As `npm start` runs it: npm's node_modules/.bin (with this checkout's `bedrock`) first.
      PATH: `${resolve('node_modules/.bin')}:${path}`,
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
  expect(tryLine).not.toMatch(/(^|[ (])bedrock /);
  expect(banner).toContain('npm install -g ./apps/cli');
  // Pasted into a bare shell (no profile, no rc) whose environment knows nothing of the product.
  const shell = (line: string) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((done) =>
      execFile(
        'bash',
        ['--noprofile', '--norc', '-c', line],
        { env: { PATH: path, HOME: home }, cwd: elsewhere, timeout: 60_000 },
        (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
      ),
    );
  const ran = await shell(tryLine!);
  expect(ran.stderr).not.toMatch(/Unauthenticated|command not found/);
  expect(ran).toMatchObject({ code: 0, stdout: expect.stringContaining('⏺ bash {"command":"ls"}') });

  // A watch stays open (as a browser's would); SIGTERM still ends the product in under 2 s.
  const cli = tryLine!.slice(tryLine!.indexOf('$(') + 2, tryLine!.indexOf(' new '));
  const id = (await shell(`${cli} ls --json | head -1`)).stdout;
  const conversationId = (JSON.parse(id) as { id: string }).id;
  // BEDROCK_RETRY_FOR=0: the watch ends (rather than resumes) once the product is gone.
  const watcher = spawn('bash', ['--noprofile', '--norc', '-c', `${cli} watch ${conversationId}`], {
    env: { PATH: path, HOME: home, BEDROCK_RETRY_FOR: '0' },
    cwd: elsewhere,
  });
  let watching = '';
  watcher.stderr.on('data', (d: Buffer) => (watching += d.toString()));
  watcher.stdout.resume();
  while (!watching.includes('watching')) {
    if (Date.now() > until) throw new Error(`no watch: ${watching}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const exited = new Promise((r) => product!.once('exit', r));
  const watchEnded = new Promise((r) => watcher.once('exit', r));
  const stopping = Date.now();
  product.kill('SIGTERM');
  await exited;
  expect(Date.now() - stopping).toBeLessThan(2000);
  await watchEnded;
}, 120_000);

it('a busy port is one line naming it and the setting that moves it, exit 1', async () => {
  const dataDir = mkdir('bedrock-busy-data-');
  const busy = createServer();
  await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
  const port = (busy.address() as AddressInfo).port;
  try {
    const ran = await new Promise<{ code: number | null; stderr: string }>((done) => {
      const p = spawn(process.execPath, ['--import', 'tsx', resolve('scripts/start.ts')], {
        env: {
          PATH: process.env.PATH,
          HOME: dataDir,
          BEDROCK_DATA_DIR: dataDir,
          BEDROCK_PORT: String(port),
          BEDROCK_GRPC_PORT: '0',
          ANTHROPIC_API_KEY: '',
          LOG_LEVEL: 'error',
        },
        cwd: resolve('.'),
      });
      let stderr = '';
      p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
      p.stdout.resume();
      p.on('exit', (code) => done({ code, stderr }));
    });
    expect(ran.code).toBe(1);
    expect(ran.stderr.trim()).toBe(
      `bedrock: port ${port} is already in use (another program, or another npm start, listens on it); set BEDROCK_PORT to a free port, e.g. BEDROCK_PORT=${port + 10} npm start`,
    );
  } finally {
    busy.close();
  }
}, 120_000);

it('SIGTERM to npm itself stops the server (npm start execs its launcher), and a second start on the same data is one line', async () => {
  const dataDir = mkdir('bedrock-npm-term-data-');
  const env = {
    PATH: process.env.PATH,
    HOME: dataDir,
    BEDROCK_DATA_DIR: dataDir,
    BEDROCK_PORT: '0',
    BEDROCK_GRPC_PORT: '0',
    ANTHROPIC_API_KEY: '',
    LOG_LEVEL: 'error',
  };
  const npm = spawn('npm', ['start', '--silent'], { env, cwd: resolve('.') });
  let out = '';
  npm.stdout.on('data', (d: Buffer) => (out += d.toString()));
  npm.stderr.resume();
  const started = Date.now();
  while (!/Web UI: +(http:\/\/[^/]+)\//.test(out)) {
    if (Date.now() - started > 90_000) throw new Error(`npm start did not print its banner: ${out}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  const url = /Web UI: +(http:\/\/[^/]+)\//.exec(out)![1]!;
  await expect(fetch(`${url}/healthz`).then((r) => r.status)).resolves.toBeLessThan(500);

  // The same data directory, other ports: refused before it opens the database.
  const second = await new Promise<{ code: number | null; stderr: string }>((done) => {
    const p = spawn(process.execPath, ['--import', 'tsx', resolve('scripts/start.ts')], { env, cwd: resolve('.') });
    let stderr = '';
    p.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    p.stdout.resume();
    p.on('exit', (code) => done({ code, stderr }));
  });
  expect(second.code).toBe(1);
  expect(second.stderr.trim().split('\n').at(-1)).toBe(
    `bedrock: another Bedrock is running with its data in ${dataDir} (it holds ${dataDir}/running.lock); stop it first, or give this one a directory of its own: BEDROCK_DATA_DIR=/path npm start`,
  );

  const stopping = Date.now();
  npm.kill('SIGTERM');
  // The server itself goes: its port refuses within seconds (not left running under a dead npm).
  let refused = false;
  while (!refused && Date.now() - stopping < 10_000) {
    refused = await fetch(`${url}/healthz`).then(
      () => false,
      () => true,
    );
    if (!refused) await new Promise((r) => setTimeout(r, 100));
  }
  expect(refused).toBe(true);
  expect(Date.now() - stopping).toBeLessThan(5_000);
}, 180_000);
