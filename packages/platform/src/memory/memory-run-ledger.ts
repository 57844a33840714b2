/** In-process run ledger: the same rules as the Redis one, with deadlines checked when read. */
import { conversationOfRunKey } from '@bedrock/contracts';
import type { RunLedger, RunRecord } from '../interfaces.ts';
import { DEFAULT_COMPLETED_RETENTION_MS, DEFAULT_JOB_LOCK_MS } from '../defaults.ts';

export interface MemoryRunLedgerOptions {
  /** How long a record is kept, ms. Default 24 h. */
  readonly retentionMs?: number;
  /** Liveness window, ms. Default 4 s. */
  readonly aliveTtlMs?: number;
  readonly now?: () => number;
}

interface Entry {
  owner: string;
  state: 'started' | 'finished';
  result: string | null;
  expiresAt: number;
}

export function createMemoryRunLedger(options: MemoryRunLedgerOptions = {}): RunLedger {
  const retentionMs = options.retentionMs ?? DEFAULT_COMPLETED_RETENTION_MS;
  const aliveTtlMs = options.aliveTtlMs ?? DEFAULT_JOB_LOCK_MS;
  const now = options.now ?? Date.now;
  const records = new Map<string, Entry>();
  const alive = new Map<string, { owner: string; until: number }>();

  function entry(key: string): Entry | undefined {
    const e = records.get(key);
    if (e && e.expiresAt <= now()) {
      records.delete(key);
      return undefined;
    }
    return e;
  }
  function isAlive(key: string): boolean {
    const a = alive.get(key);
    if (a && a.until <= now()) alive.delete(key);
    return (a?.until ?? 0) > now();
  }
  let calls = 0;
  function prune(): void {
    // Lazily, every 1000 writes, so the maps hold at most the work of the retention period.
    if (++calls % 1000 !== 0) return;
    const t = now();
    for (const [key, e] of records) if (e.expiresAt <= t) records.delete(key);
    for (const [key, a] of alive) if (a.until <= t) alive.delete(key);
  }
  const toRecord = (key: string, e: Entry): RunRecord => ({
    owner: e.owner,
    state: e.state,
    alive: e.state === 'started' && isAlive(key),
    result: e.result,
  });
  const touch = (key: string, owner: string) => alive.set(key, { owner, until: now() + aliveTtlMs });

  return {
    aliveTtlMs,
    heartbeatMs: Math.max(1, Math.floor(aliveTtlMs / 4)),
    async claim(key, owner) {
      const existing = entry(key);
      if (existing) return toRecord(key, existing);
      records.set(key, { owner, state: 'started', result: null, expiresAt: now() + retentionMs });
      touch(key, owner);
      prune();
      return null;
    },
    async heartbeat(key, owner) {
      const existing = entry(key);
      if (!existing) records.set(key, { owner, state: 'started', result: null, expiresAt: now() + retentionMs });
      else if (existing.owner !== owner || existing.state !== 'started') return false;
      touch(key, owner);
      return true;
    },
    async markAlive(key, owner) {
      touch(key, owner);
      prune();
    },
    async isAlive(key) {
      return isAlive(key);
    },
    async finish(key, owner, result) {
      records.set(key, { owner, state: 'finished', result, expiresAt: now() + retentionMs });
      alive.delete(key);
    },
    async settle(key, result) {
      let e = entry(key);
      if (!e || e.state !== 'finished') {
        e = { owner: e?.owner ?? '', state: 'finished', result, expiresAt: now() + retentionMs };
        records.set(key, e);
        alive.delete(key);
      }
      return toRecord(key, e);
    },
    async get(key) {
      const e = entry(key);
      return e ? toRecord(key, e) : null;
    },
    async removeConversation(conversationId) {
      let removed = 0;
      for (const key of [...records.keys()]) {
        if (conversationOfRunKey(key) !== conversationId) continue;
        records.delete(key);
        alive.delete(key);
        removed += 1;
      }
      return removed;
    },
    async close() {
      records.clear();
      alive.clear();
    },
  };
}
