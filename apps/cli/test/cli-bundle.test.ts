/**
 * The `bedrock` bin runs the esbuild bundle dist/bedrock.cjs (made by `npm run build`, which
 * `npm ci` runs) and behaves as the TypeScript sources do; without a bundle it runs the sources
 * through tsx and says so on stderr (docs/cli.md, "How it runs"). cli.test.ts and
 * cli-retry.test.ts run the same bin against real servers.
 */
import { execFile, execFileSync, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { hashToken } from '@bedrock/platform/server';
import { USAGE } from '../src/run.ts';

const PKG = resolve('apps/cli');
const BIN = resolve('node_modules/.bin/bedrock');
const NOTE = /^bedrock: note: the CLI bundle is (missing|out of date)/;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

function bin(path: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((done) => {
    execFile(
      path,
      args,
      {
        env: { PATH: process.env.PATH, HOME: '/nonexistent', BEDROCK_URL: 'http://127.0.0.1:9', BEDROCK_RETRY_FOR: '0', ...env },
        timeout: 30_000,
      },
      (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

let scratch: string;
beforeAll(async () => {
  scratch = mkdtempSync(join(tmpdir(), 'bedrock-cli-bundle-'));
  // A fresh `npm ci` built it; after a source change (a developer's edit) build it again here.
  if (NOTE.test((await bin(BIN, ['--help'])).stderr)) execFileSync(process.execPath, [join(PKG, 'scripts', 'build.mjs')]);
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the bedrock bin', () => {
  it('runs the bundle: no note, the same help as the sources', async () => {
    const help = await bin(BIN, ['--help']);
    expect(help).toEqual({ code: 0, stdout: USAGE, stderr: '' });
    expect(await bin(BIN, ['--help'], { BEDROCK_CLI: 'source' })).toEqual(help);
    // The bundle (the entry and the commands' client-HASH.cjs) holds no tsx and none of the
    // servers' plumbing it need not start.
    const dist = join(PKG, 'dist');
    const files = readdirSync(dist).filter((f) => f.endsWith('.cjs'));
    expect(files).toContain('bedrock.cjs');
    expect(files.some((f) => /^client-[0-9a-f]+\.cjs$/.test(f))).toBe(true);
    for (const f of files) expect(readFileSync(join(dist, f), 'utf8')).not.toMatch(/tsx\/esm|pino|prom-client/);
  });

  it('the bundle and the sources answer alike: token hash, usage errors, an unreachable server', async () => {
    for (const args of [['token', 'hash', 'abc'], ['ls', '--bogus'], ['frobnicate'], ['send', 'only-an-id'], ['ls'], ['cancel', 'x']]) {
      const bundled = await bin(BIN, args);
      const source = await bin(BIN, args, { BEDROCK_CLI: 'source' });
      expect([args, bundled]).toEqual([args, source]);
      expect(bundled.stderr).not.toMatch(NOTE);
    }
    expect((await bin(BIN, ['token', 'hash', 'abc'])).stdout).toContain(hashToken('abc'));
    expect((await bin(BIN, ['ls'])).code).toBe(4);
    expect((await bin(BIN, ['token', 'new'])).stdout).toMatch(/\S{20,}/);
  }, 60_000);

  it('a code cache V8 refuses (here: garbage) is ignored and written anew', async () => {
    const dist = join(PKG, 'dist');
    const [client] = JSON.parse(readFileSync(join(dist, 'clients.json'), 'utf8')) as string[];
    const cache = join(dist, `${client}.${process.version}-${process.arch}.cache`);
    writeFileSync(cache, 'not a code cache');
    const hashed = await bin(BIN, ['token', 'hash', 'abc']);
    expect(hashed).toEqual({ code: 0, stdout: `${hashToken('abc')}\n`, stderr: '' });
    expect(readFileSync(cache).length).toBeGreaterThan(1000);
    expect(await bin(BIN, ['token', 'hash', 'abc'])).toEqual(hashed);
  });

  it('without a bundle runs the sources through tsx and says so in one line', async () => {
    // A copy of the package with the bin but no dist/: the sources and node_modules linked.
    const pkg = join(scratch, 'cli');
    mkdirSync(join(pkg, 'bin'), { recursive: true });
    cpSync(join(PKG, 'bin', 'bedrock.js'), join(pkg, 'bin', 'bedrock.js'));
    symlinkSync(join(PKG, 'src'), join(pkg, 'src'));
    symlinkSync(resolve('node_modules'), join(pkg, 'node_modules'));
    const help = await bin(join(pkg, 'bin', 'bedrock.js'), ['--help']);
    expect(help.code).toBe(0);
    expect(help.stdout).toBe(USAGE);
    expect(help.stderr).toMatch(/^bedrock: note: the CLI bundle is missing; running the sources through tsx \(slower; .*\)\n$/);
  }, 60_000);

  it('installs as a copy (npm install -g --install-links ./apps/cli) that runs with nothing but Node: no sources, no node_modules', async () => {
    const prefix = join(scratch, 'global');
    execFileSync('npm', ['install', '--global', '--install-links', '--offline', '--no-audit', '--no-fund', '--prefix', prefix, PKG], {
      stdio: 'pipe',
    });
    const installed = join(prefix, 'lib', 'node_modules', 'bedrock-agent');
    expect(readdirSync(installed).sort()).toEqual(['bin', 'dist', 'package.json']);
    const installedBin = join(prefix, 'bin', 'bedrock');
    // Node only on the PATH: the copy needs no tsx, no workspace package, no npx.
    const path = `${dirname(process.execPath)}:/usr/bin:/bin`;
    expect(await bin(installedBin, ['--help'], { PATH: path })).toEqual({ code: 0, stdout: USAGE, stderr: '' });
    expect(await bin(installedBin, ['token', 'hash', 'abc'], { PATH: path })).toEqual({
      code: 0,
      stdout: `${hashToken('abc')}\n`,
      stderr: '',
    });
    const down = await bin(installedBin, ['ls'], { PATH: path });
    expect(down.code).toBe(4);
    expect(down.stderr).toMatch(/^bedrock: Unavailable: .*cannot reach the Bedrock server at http:\/\/127\.0\.0\.1:9: is it running/);
    // `bedrock acp` and its own bundle (the ACP SDK, zod): an editor's initialize is answered.
    const initialize = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: 1, clientCapabilities: {} } };
    const acp = spawnSync(installedBin, ['acp'], {
      input: `${JSON.stringify(initialize)}\n`,
      env: { PATH: path, HOME: '/nonexistent', BEDROCK_URL: 'http://127.0.0.1:9' },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect({ status: acp.status, stderr: acp.stderr }).toEqual({ status: 0, stderr: '' });
    expect(JSON.parse(acp.stdout)).toMatchObject({ jsonrpc: '2.0', id: 1, result: { protocolVersion: 1, agentInfo: { name: 'bedrock' } } });
  }, 120_000);
});
