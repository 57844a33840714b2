/**
 * Real git repositories for the tests that clone: bare repositories (`git init --bare`, one
 * commit pushed into each) served read-only by `git daemon` on a free loopback port, as
 * git://127.0.0.1:PORT/NAME. A name that was not made is answered as git daemon answers it.
 */
import { execFileSync, spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { freePort } from '@bedrock/platform/server';

export interface GitDaemon {
  /** git://127.0.0.1:PORT/NAME */
  url(name: string): string;
  close(): Promise<void>;
}

/** The files (path: content) of each repository's one commit, by name (`acme/api.git`). */
export type GitRepos = Readonly<Record<string, Readonly<Record<string, string>>>>;

function git(cwd: string, ...args: string[]): void {
  execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.invalid', '-c', 'init.defaultBranch=main', ...args], {
    cwd,
    stdio: 'pipe',
  });
}

const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

async function listening(port: number, daemon: ChildProcess): Promise<boolean> {
  for (let i = 0; i < 200 && running(daemon); i++) {
    const ok = await new Promise<boolean>((resolve) => {
      const socket = connect(port, '127.0.0.1', () => {
        socket.end();
        resolve(true);
      });
      socket.on('error', () => resolve(false));
    });
    if (ok) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return false;
}

export async function startGitDaemon(repos: GitRepos): Promise<GitDaemon> {
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-bff-git-'));
  const base = join(dir, 'repos');
  for (const [name, files] of Object.entries(repos)) {
    const bare = join(base, name);
    mkdirSync(bare, { recursive: true });
    git(bare, 'init', '--quiet', '--bare');
    const work = join(dir, 'work', name);
    mkdirSync(work, { recursive: true });
    git(work, 'init', '--quiet');
    for (const [path, content] of Object.entries(files)) {
      mkdirSync(dirname(join(work, path)), { recursive: true });
      writeFileSync(join(work, path), content);
    }
    git(work, 'add', '--all');
    git(work, 'commit', '--quiet', '-m', 'first');
    git(work, 'push', '--quiet', bare, 'HEAD:refs/heads/main');
  }
  rmSync(join(dir, 'work'), { recursive: true, force: true });

  // A port free a moment ago may be taken by the time the daemon binds it: then another.
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    let stderr = '';
    const daemon = spawn('git', ['daemon', '--export-all', `--base-path=${base}`, '--reuseaddr', '--listen=127.0.0.1', `--port=${port}`], {
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    daemon.stderr!.on('data', (chunk: Buffer) => void (stderr += chunk.toString()));
    const exited = new Promise<void>((resolve) => daemon.once('exit', () => resolve()));
    if (await listening(port, daemon)) {
      return {
        url: (name) => `git://127.0.0.1:${port}/${name}`,
        async close() {
          if (running(daemon)) {
            daemon.kill('SIGTERM');
            await exited;
          }
          rmSync(dir, { recursive: true, force: true });
        },
      };
    }
    if (running(daemon)) daemon.kill('SIGKILL');
    await exited;
    if (attempt === 4) {
      rmSync(dir, { recursive: true, force: true });
      throw new Error(`git daemon did not listen on 127.0.0.1:${port}: ${stderr.trim()}`);
    }
  }
}
