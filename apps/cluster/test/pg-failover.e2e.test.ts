/**
 * Postgres failover end to end (docs/conversation.md, "Postgres failover"): the chaos scenario of
 * chaos.e2e.test.ts on a Patroni cluster of 2 nodes with synchronous replication (src/ha-postgres.ts),
 * the services given the multi-host DATABASE_URL. kill -9 of the primary's postmaster mid-turn, twice
 * (over and back), then at rest with every conversation sent its next message at once: at rest within
 * 15 s, no tool run twice, every tool_use answered once, every acknowledged user message kept once.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startHaPostgres, type HaPostgres } from '../src/index.ts';
import { startChaos, type Chaos, type FaultOutcome } from './support/chaos.ts';

let ha: HaPostgres;
let haDir: string;
let chaos: Chaos;
const outcomes: Array<FaultOutcome & { promotedMs: number }> = [];
let promotedMs = 0;

/** kill -9 of the primary's postmaster; Patroni's part (until another node answers read-write) is measured alongside. */
async function killPrimary(): Promise<string> {
  const primary = (await ha.primary())!;
  const at = Date.now();
  process.kill(ha.postmasterPid(primary), 'SIGKILL');
  void (async () => {
    for (;;) {
      const now = await ha.primary();
      if (now && now !== primary) return (promotedMs = Date.now() - at);
      await new Promise((r) => setTimeout(r, 100));
    }
  })();
  return `the postmaster of ${primary.name}, the primary`;
}

beforeAll(async () => {
  haDir = mkdtempSync(join(tmpdir(), 'bedrock-pg-failover-'));
  ha = await startHaPostgres({ dir: haDir, scope: `pg-failover-${process.pid}` });
  chaos = await startChaos('pgfail', {
    databaseUrl: ha.url(`bedrock_e2e_pgfail_${process.pid}`),
    killPostgresPrimary: killPrimary,
  });
}, 300_000);

afterAll(async () => {
  if (outcomes.length)
    console.log(
      outcomes
        .map(
          (o) =>
            `postgres: a new primary after ${(o.promotedMs / 1000).toFixed(1)} s, every conversation at rest after ${(o.restMs / 1000).toFixed(1)} s (held ${o.held})`,
        )
        .join('\n'),
    );
  await chaos?.close();
  await ha?.stop();
  if (haDir) rmSync(haDir, { recursive: true, force: true });
}, 120_000);

describe('Postgres failover with 20 live conversations', () => {
  it.each([['first'], ['back']])(
    'every conversation is at rest within 15 s after kill -9 of the primary (failover %s)',
    async () => {
      // The previous primary has come back as the synchronous standby.
      const before = await ha.waitHealthy(120_000);
      promotedMs = 0;
      // Patroni promotes the synchronous standby; the old primary comes back as a standby (pg_rewind).
      const outcome = await chaos.fault('postgres');
      const after = (await ha.primary())!;
      outcomes.push({ ...outcome, promotedMs });
      expect(after.name).not.toBe(before.name);
      expect(promotedMs).toBeGreaterThan(0);
      expect(outcome.restMs).toBeLessThanOrEqual(15_000);
    },
    240_000,
  );

  it('acknowledges every message sent through a failover (retried with its request id), and its turn runs', async () => {
    const before = await ha.waitHealthy(120_000);
    promotedMs = 0;
    const outcome = await chaos.sendThrough(killPrimary);
    outcomes.push({ ...outcome, promotedMs });
    console.log(`sends through the failover: ${outcome.retries} retried`);
    expect((await ha.primary())!.name).not.toBe(before.name);
    expect(outcome.restMs).toBeLessThanOrEqual(15_000);
  }, 240_000);

  it('ran no tool twice, answered every tool_use exactly once, and kept every acknowledged user message once', async () => {
    const { problems, toolCalls, interrupted, lost, ledgerLines } = await chaos.check();
    console.log(`${toolCalls} tool calls, ${ledgerLines} ledger lines, ${interrupted} answered interrupted, ${lost} answered lost`);
    expect(problems).toEqual([]);
    // Tools did run, during all three turns.
    expect(ledgerLines).toBeGreaterThan(20 * 3);
  }, 60_000);
});
