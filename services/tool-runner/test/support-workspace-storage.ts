/**
 * What the WorkspaceStorageService tests share: a client of a test runner's service, the
 * error a call fails with, and a `git daemon` on loopback serving one small repository.
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer, connect } from 'node:net';
import { join } from 'node:path';
import { ConnectError, createClient } from '@connectrpc/connect';
import type { Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { WorkspaceStorageService } from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { TEST_SERVICES } from './support-runner.ts';

/** The workspaces' owner in these tests. */
export const UID = 200_001;
export const MiB = 1024 ** 2;

export function client(
  runner: ToolRunner,
  token: string | null = TEST_SERVICES.tokens.conversation!,
): Client<typeof WorkspaceStorageService> {
  return createClient(
    WorkspaceStorageService,
    createGrpcTransport({ baseUrl: runner.grpcUrl, interceptors: token === null ? [] : [serviceTokenInterceptor(token)] }),
  );
}

export async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

async function listening(port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`nothing listens on ${port}`);
}

/** A bare repository with one commit, served read-only by `git daemon` on loopback. */
export async function gitDaemon(dir: string): Promise<{ url: (name: string) => string; stop: () => void }> {
  const base = join(dir, 'git');
  const work = join(dir, 'git-work');
  mkdirSync(work, { recursive: true });
  const git = (cwd: string, ...args: string[]) =>
    execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.invalid', ...args], { cwd, stdio: 'pipe' });
  git(work, 'init', '-q', '-b', 'main');
  writeFileSync(join(work, 'README.md'), 'hello from the repository\n');
  git(work, 'add', 'README.md');
  git(work, 'commit', '-q', '-m', 'first');
  mkdirSync(base, { recursive: true });
  git(base, 'clone', '-q', '--bare', work, join(base, 'repo.git'));
  const port = await freePort();
  const daemon: ChildProcess = spawn(
    'git',
    ['daemon', '--export-all', `--base-path=${base}`, '--listen=127.0.0.1', `--port=${port}`, '--reuseaddr', base],
    // Its own process group: `git daemon` runs `git-daemon` as a child, which a kill of `git`
    // alone would leave running after the test.
    { stdio: 'ignore', detached: true },
  );
  await listening(port);
  const stop = () => {
    try {
      process.kill(-daemon.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  };
  return { url: (name) => `git://127.0.0.1:${port}/${name}`, stop };
}
