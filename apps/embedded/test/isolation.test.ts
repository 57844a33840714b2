/**
 * The isolation battery against `npm start`'s embedded product (one process, PGlite, the
 * in-process transport, the offline model), run as root as CI runs it: tools must run as an
 * unprivileged user, read none of the product's secrets, reach none of its ports, and write
 * only their working directory, while the normal flows keep working.
 */
import { beforeAll, afterAll } from '@jest/globals';
import { chmodSync, chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';
import { defineIsolationExpectations, runIsolationBattery, type IsolationResults } from '@bedrock/testkit/isolation-battery';
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
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
    },
  });
  const client = createClient(
    ConversationService,
    createConnectTransport({
      baseUrl: bedrock.httpUrl,
      httpVersion: '1.1',
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${bedrock.token}`);
          return next(req);
        },
      ],
    }),
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

defineIsolationExpectations({
  layout: 'embedded',
  results: () => results,
  ...(asRoot ? { toolUser: NOBODY } : {}),
  // The local token, a root-only file, this process's environment.
  secrets: () => 3,
  deniedPorts: ['conversation', 'tool-runner'],
  outsideDir: () => dirs[2] as string,
});
