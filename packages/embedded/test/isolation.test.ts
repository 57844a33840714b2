/**
 * The isolation battery against `npm start`'s embedded product (one process, PGlite, the
 * in-process transport, the offline model), run as root as CI runs it: tools must run as an
 * unprivileged user, read none of the product's secrets, reach none of its ports, and write
 * only their working directory, while the normal flows keep working.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';
import { runIsolationBattery, type IsolationResults } from '@bedrock/testkit/isolation-battery';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;

let bedrock: RunningEmbedded;
let results: IsolationResults;
let listener: Server;
const dirs: string[] = [];
const mkdir = (prefix: string) => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  dirs.push(dir);
  return dir;
};

beforeAll(async () => {
  const dataDir = mkdir('bedrock-iso-data-');
  const workspace = mkdir('bedrock-iso-ws-');
  const outsideDir = mkdir('bedrock-iso-outside-');
  if (asRoot) {
    // The workspace belongs to a user, as a project does; `owner` makes tools run as that user.
    chownSync(workspace, NOBODY, NOBODY);
    chownSync(outsideDir, NOBODY, NOBODY);
  }
  const secret = join(outsideDir, 'root-only-secret');
  writeFileSync(secret, 'root secret\n', { mode: 0o600 });
  chownSync(secret, 0, 0);
  chmodSync(secret, 0o600);
  listener = createServer((s) => s.destroy());
  await new Promise<void>((r) => listener.listen(0, '127.0.0.1', r));
  bedrock = await startEmbedded({ env: { ...process.env, BEDROCK_DATA_DIR: dataDir, BEDROCK_PORT: '0', BEDROCK_GRPC_PORT: '0', ANTHROPIC_API_KEY: '', DATABASE_URL: '', LOG_LEVEL: 'warn' } });
  const client = createClient(
    ConversationService,
    createConnectTransport({ baseUrl: bedrock.httpUrl, httpVersion: '1.1', interceptors: [(next) => (req) => { req.header.set('authorization', `Bearer ${bedrock.token}`); return next(req); }] }),
  );
  results = await runIsolationBattery({
    client,
    workspace,
    outsideDir,
    secretFiles: [join(dataDir, 'token'), secret],
    servicePids: [process.pid],
    // The public ports (web-bff) stay reachable: they answer only with a user's token.
    deniedPorts: bedrock.internalPorts,
    openPort: (listener.address() as { port: number }).port,
    turnTimeoutMs: 90_000,
  });
}, 240_000);

afterAll(async () => {
  await bedrock?.stop();
  await new Promise<void>((r) => listener?.close(() => r()));
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

describe.each(['restricted', 'unrestricted'] as const)('embedded: a %s tool', (mode) => {
  const probes = () => results[mode];

  it('runs as an unprivileged user, never root', () => {
    if (asRoot) expect(probes().uid.trim()).toBe(`uid=${NOBODY} gid=${NOBODY}`);
    expect(probes().uid).not.toContain('uid=0');
  });

  it('cannot read the token store, a root-owned 0600 file or the service environment', () => {
    expect(probes().secrets).not.toContain('READ');
    expect(probes().secrets.match(/DENIED/g)?.length).toBe(3);
  });

  it("cannot connect to the system's own ports", () => {
    for (const line of probes().ports.trim().split('\n').filter((l) => !l.endsWith('outside'))) expect(line).toMatch(/^CLOSED /);
  });

  it('has a private scratch and home that the next run does not see', () => {
    expect(probes().scratch).toContain('planted');
    expect(probes().scratch).toContain('SCRATCH PRIVATE');
  });
});

describe('embedded: network and writes', () => {
  it('Restricted has no network at all; Unrestricted reaches a port outside the system', () => {
    expect(results.restricted.ports).toContain('CLOSED outside');
    expect(results.unrestricted.ports).toContain('OPEN outside');
  });

  it('Unrestricted writes its working directory and nothing else', () => {
    expect(results.unrestricted.writes).toContain('WROTE-IN');
    expect(results.unrestricted.writes).toContain('REFUSED-OUT');
    expect(existsSync(join(dirs[1] as string, 'x'))).toBe(false);
  });
});
