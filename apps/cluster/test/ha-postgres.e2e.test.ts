/**
 * The pool that follows the primary (services/conversation/src/db/pool.ts) against a real
 * Patroni cluster (src/ha-postgres.ts: etcd + 2 nodes, synchronous replication): kill -9 of the
 * primary's postmaster while writers commit rows. Every commit the pool acknowledged is on the
 * promoted standby, the pool moves to it by itself, and the time from the kill to the first
 * commit on the new primary is printed (docs/conversation.md, "Postgres failover").
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createPool, type FollowingPool } from '@bedrock/conversation/db-pool';
import { startHaPostgres, type HaPostgres } from '../src/index.ts';

let ha: HaPostgres;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'bedrock-ha-pool-'));
  ha = await startHaPostgres({ dir, scope: `ha-pool-${process.pid}` });
}, 120_000);

afterAll(async () => {
  await ha?.stop();
  rmSync(dir, { recursive: true, force: true });
}, 60_000);

describe('a pool over a Patroni cluster', () => {
  it('loses no acknowledged commit and follows the promoted standby after kill -9 of the primary', async () => {
    const before = (await ha.primary())!;
    const moves: string[] = [];
    // The standby first: the pool must pass it over for the read-write node.
    const ordered = [...ha.nodes].sort((a, b) => (a === before ? 1 : b === before ? -1 : 0));
    const url = `postgres://postgres@${ordered.map((n) => `127.0.0.1:${n.port}`).join(',')}/postgres?target_session_attrs=read-write`;
    const pool: FollowingPool = createPool({ connectionString: url, max: 4, onPrimary: ({ host }) => moves.push(host) });
    pool.on('error', () => undefined);
    try {
      await pool.query('CREATE TABLE IF NOT EXISTS acked (writer int, n int, PRIMARY KEY (writer, n))');
      expect(pool.locator?.primary?.port).toBe(before.port);

      // 4 writers, each committing numbered rows as fast as it can; a failed commit is retried
      // (the row is idempotent by its key), an acknowledged one is remembered.
      const acked: Array<Set<number>> = [new Set(), new Set(), new Set(), new Set()];
      let stopAt = Infinity;
      let firstAfterKill = 0;
      let killedAt = 0;
      let failures = 0;
      const writer = async (w: number) => {
        let n = 0;
        while (Date.now() < stopAt) {
          try {
            await pool.query('INSERT INTO acked VALUES ($1, $2) ON CONFLICT DO NOTHING', [w, n]);
            acked[w]!.add(n);
            if (killedAt && !firstAfterKill) firstAfterKill = Date.now();
            n++;
          } catch {
            failures++;
            await new Promise((r) => setTimeout(r, 50));
          }
        }
      };
      const writers = [0, 1, 2, 3].map(writer);
      await new Promise((r) => setTimeout(r, 1500));
      const ackedBeforeKill = acked.reduce((sum, s) => sum + s.size, 0);
      expect(ackedBeforeKill).toBeGreaterThan(10);

      killedAt = Date.now();
      process.kill(ha.postmasterPid(before), 'SIGKILL');
      const deadline = Date.now() + 30_000;
      while (!firstAfterKill && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      // Write a little longer on the new primary, then stop.
      stopAt = Date.now() + 1000;
      await Promise.all(writers);
      const failoverMs = firstAfterKill - killedAt;
      console.log(
        `first commit on the new primary ${(failoverMs / 1000).toFixed(1)} s after kill -9 of ${before.name}; ` +
          `${acked.reduce((sum, s) => sum + s.size, 0)} acknowledged commits, ${failures} failed statements, primary moves: ${moves.join(' -> ')}`,
      );
      expect(firstAfterKill).toBeGreaterThan(0);

      const after = (await ha.primary())!;
      expect(after.name).not.toBe(before.name);
      expect(pool.locator?.primary?.port).toBe(after.port);
      // Every acknowledged commit is on the new primary (synchronous replication).
      const { rows } = await pool.query<{ writer: number; n: number }>('SELECT writer, n FROM acked');
      const stored = new Set(rows.map((r) => `${r.writer}/${r.n}`));
      const missing = acked.flatMap((s, w) => [...s].filter((n) => !stored.has(`${w}/${n}`)).map((n) => `${w}/${n}`));
      expect(missing).toEqual([]);
      expect(failoverMs).toBeLessThan(15_000);
    } finally {
      await pool.end();
    }
  }, 90_000);
});
