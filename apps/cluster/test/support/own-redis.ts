/**
 * A redis-server of a test's own, so that it can be killed and restarted without touching the
 * shared one. Its users live in an ACL file, as in a deployment: a restart loses every key, not
 * the services' users (the local cluster saves the users it creates there).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';

export class OwnRedis {
  private child: ChildProcess | null = null;
  private readonly aclFile: string;
  constructor(readonly port: number) {
    const dir = mkdtempSync(join(tmpdir(), 'bedrock-chaos-redis-'));
    this.aclFile = join(dir, 'users.acl');
    writeFileSync(this.aclFile, 'user default on nopass ~* &* +@all\n');
  }
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--aclfile', this.aclFile];
    this.child = spawn('redis-server', args, { stdio: 'ignore' });
    const deadline = Date.now() + 10_000;
    for (;;) {
      const client = new Redis({ port: this.port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
      client.on('error', () => undefined);
      try {
        await client.connect();
        await client.ping();
        client.disconnect();
        return;
      } catch {
        client.disconnect();
        if (Date.now() > deadline) throw new Error('redis-server did not start');
        await new Promise((r) => setTimeout(r, 50));
      }
    }
  }
  async kill(): Promise<void> {
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const gone = new Promise((r) => child.once('exit', r));
    child.kill('SIGKILL');
    await gone;
  }
}
