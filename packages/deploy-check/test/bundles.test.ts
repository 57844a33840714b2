/**
 * What the images run, run here: each service is bundled exactly as its Dockerfile does
 * (scripts/bundle.ts → dist/<service>), started with plain `node <dir>/main.js`, must answer
 * /readyz and /metrics, and must exit 0 within its grace after SIGTERM.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from '@bedrock/platform/server';
import { bundleService, ROOT, SERVICES, type BundleResult, type Service } from '../src/bundle.ts';

const OUT = join(ROOT, 'dist', `.check-${process.pid}`);
const GRACE_MS = 2000;
// A database of this run's own, dropped after it: a database left by an older checkout would hold its migrations.
const DB = `bedrock_bundle_check_${process.pid}`;
const bundles = new Map<Service, BundleResult>();

beforeAll(async () => {
  const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.query(`CREATE DATABASE ${DB}`);
  await admin.end();
  for (const r of await Promise.all(SERVICES.map((s) => bundleService(s, OUT)))) bundles.set(r.service, r);
}, 120_000);

afterAll(async () => {
  rmSync(OUT, { recursive: true, force: true });
  const admin = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/postgres' });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS ${DB} WITH (FORCE)`);
  await admin.end();
});

const ENV: Record<Service, Record<string, string>> = {
  conversation: { DATABASE_URL: `postgres://postgres@127.0.0.1:5432/${DB}`, BEDROCK_GRPC_PORT: '0' },
  'llm-gateway': {},
  'tool-runner': { BEDROCK_GRPC_PORT: '0', BEDROCK_SANDBOX_HELPER: join(ROOT, 'services/tool-runner/bin/bedrock-sandbox') },
  'web-bff': { BEDROCK_PORT: '0', BEDROCK_GRPC_PORT: '0', BEDROCK_UI_DIR: join(OUT, 'web-bff', 'ui') },
};

/** Starts a bundle with its metrics on a free port. */
async function startBundle(service: Service) {
  const metricsPort = await freePort();
  const child = spawn(process.execPath, [bundles.get(service)!.mainFile], {
    // Run from / so nothing is found through the working directory.
    cwd: '/',
    env: {
      PATH: process.env.PATH ?? '',
      BEDROCK_TRANSPORT: 'memory',
      BEDROCK_HOST: '127.0.0.1',
      BEDROCK_METRICS_PORT: String(metricsPort),
      BEDROCK_SHUTDOWN_GRACE: `${GRACE_MS}ms`,
      LOG_LEVEL: 'info',
      ...ENV[service],
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  child.stdout.on('data', (b: Buffer) => (log += b.toString()));
  child.stderr.on('data', (b: Buffer) => (log += b.toString()));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) =>
    child.once('exit', (code) => resolve({ code, at: Date.now() })),
  );
  const metricsUrl = `http://127.0.0.1:${metricsPort}`;
  return { child, exited, metricsUrl, log: () => log };
}

describe('service bundles (what the images run)', () => {
  it('bundles each service into one file; only native packages stay outside, pinned to the lockfile', () => {
    const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version: string }> };
    for (const service of SERVICES) {
      const b = bundles.get(service)!;
      expect(existsSync(b.mainFile)).toBe(true);
      const pkg = JSON.parse(readFileSync(join(b.dir, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
      expect(pkg.dependencies).toEqual(b.externals);
      for (const [name, version] of Object.entries(b.externals)) expect(version).toBe(lock.packages[`node_modules/${name}`]!.version);
    }
    expect(Object.keys(bundles.get('llm-gateway')!.externals)).toEqual(['sharp']);
    expect(bundles.get('tool-runner')!.externals).toEqual({});
    expect(existsSync(join(bundles.get('conversation')!.dir, 'migrations'))).toBe(true);
  });

  it.each(SERVICES)(
    '%s: node main.js answers /readyz (naming a missing dependency) and /metrics, then exits 0 within its grace on SIGTERM',
    async (service) => {
      const s = await startBundle(service);
      // Started alone: the gateway and web-bff need the conversation service, which is not
      // running, so their /readyz must say 503 naming it; the others are ready on their own.
      const needsConversation = service === 'llm-gateway' || service === 'web-bff';
      const expected = (status: number, body: string) => (needsConversation ? status === 503 && /conversation/.test(body) : status === 200);
      try {
        let answer = { status: 0, body: '' };
        for (let i = 0; i < 300 && !expected(answer.status, answer.body) && s.child.exitCode === null; i++) {
          answer = await fetch(`${s.metricsUrl}/readyz`).then(
            async (r) => ({ status: r.status, body: await r.text() }),
            () => ({ status: 0, body: '' }),
          );
          if (!expected(answer.status, answer.body)) await new Promise((r) => setTimeout(r, 100));
        }
        expect([answer.status, expected(answer.status, answer.body) ? '' : `${answer.body}\n${s.log()}`]).toEqual([
          needsConversation ? 503 : 200,
          '',
        ]);
        const metrics = await (await fetch(`${s.metricsUrl}/metrics`)).text();
        expect(metrics).toContain(`service="${service}"`);
        expect(metrics).toContain('process_resident_memory_bytes');
        const sent = Date.now();
        s.child.kill('SIGTERM');
        const { code, at } = await s.exited;
        expect([code, s.log().includes('"level":"error"')]).toEqual([0, false]);
        // Each service may use its grace once per stage (jobs, then RPCs): well inside 2 x grace + 1 s.
        expect(at - sent).toBeLessThan(2 * GRACE_MS + 1000);
      } finally {
        if (s.child.exitCode === null) s.child.kill('SIGKILL');
      }
    },
    45_000,
  );
});
