/**
 * The pool that follows the primary (pool.ts): the host list of DATABASE_URL, and a pool over a
 * list whose first host is down. The failover itself (a standby promoted by Patroni) is tested
 * in apps/cluster/test/ha-postgres.e2e.test.ts.
 */
import { createServer, type Server } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ADMIN_URL } from '@bedrock/testkit/database';
import { createPool, parsePostgresUrl } from './pool.ts';

describe('parsePostgresUrl', () => {
  it('reads one host, and several with their ports (5432 by default), IPv6 in brackets', () => {
    expect(parsePostgresUrl('postgres://u:p@db/bedrock').hosts).toEqual([{ host: 'db', port: 5432 }]);
    const url = parsePostgresUrl('postgresql://u:p%40ss@h1:5433,h2,[::1]:6000/bedrock?target_session_attrs=read-write&sslmode=disable');
    expect(url.hosts).toEqual([
      { host: 'h1', port: 5433 },
      { host: 'h2', port: 5432 },
      { host: '::1', port: 6000 },
    ]);
    // One host each, credentials and other parameters kept, target_session_attrs dropped (the pool does it).
    expect(url.urlFor(url.hosts[1]!)).toBe('postgresql://u:p%40ss@h2:5432/bedrock?sslmode=disable');
    expect(url.urlFor(url.hosts[2]!)).toBe('postgresql://u:p%40ss@[::1]:6000/bedrock?sslmode=disable');
  });

  it('refuses what it cannot honour', () => {
    expect(() => parsePostgresUrl('mysql://h1,h2/db')).toThrow('not a postgres');
    expect(() => parsePostgresUrl('postgres://h1,:5432/db')).toThrow('bad host');
    expect(() => parsePostgresUrl('postgres://h1,h2:99999/db')).toThrow('bad port');
    expect(() => parsePostgresUrl('postgres://h1,h2/db?target_session_attrs=read-only')).toThrow('not supported');
  });
});

describe('createPool with several hosts', () => {
  // A port that accepts TCP and closes at once: a host that is down but not refusing.
  let dead: Server;
  let deadPort = 0;
  beforeAll(async () => {
    dead = createServer((socket) => socket.destroy());
    await new Promise<void>((r) => dead.listen(0, '127.0.0.1', r));
    deadPort = (dead.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((r) => dead.close(() => r())));

  it('is a plain pg.Pool for one host', () => {
    const pool = createPool({ connectionString: ADMIN_URL });
    expect(pool.locator).toBeUndefined();
    return pool.end();
  });

  it('skips a host that is down and uses the read-write one', async () => {
    const admin = new URL(ADMIN_URL);
    const url = `postgres://${admin.username}@127.0.0.1:${deadPort},${admin.hostname}:${admin.port || 5432}${admin.pathname}?target_session_attrs=read-write`;
    const moves: Array<{ host: string; previous: string | undefined }> = [];
    const pool = createPool({ connectionString: url, max: 3, onPrimary: (e) => moves.push(e) });
    try {
      const results = await Promise.all([1, 2, 3, 4, 5].map((n) => pool.query<{ n: number }>('SELECT $1::int AS n', [n])));
      expect(results.map((r) => r.rows[0]!.n)).toEqual([1, 2, 3, 4, 5]);
      expect(pool.locator?.primary).toEqual({ host: admin.hostname, port: Number(admin.port || 5432) });
      // Concurrent connections shared one search: the primary was found once.
      expect(moves).toEqual([{ host: `${admin.hostname}:${admin.port || 5432}`, previous: undefined }]);
    } finally {
      await pool.end();
    }
  });

  const twoHosts = () => {
    const admin = new URL(ADMIN_URL);
    return `postgres://${admin.username}@127.0.0.1:${deadPort},${admin.hostname}:${admin.port || 5432}${admin.pathname}`;
  };

  it('drops a connection whose server turned read-only (25006) and looks for the primary again', async () => {
    const pool = createPool({ connectionString: twoHosts(), max: 2 });
    try {
      const client = await pool.connect();
      expect(pool.locator?.primary).toBeDefined();
      // As a demoted primary answers: every write refused as read-only.
      await client.query('SET default_transaction_read_only = on');
      await expect(client.query('CREATE TEMP TABLE t (x int)')).rejects.toMatchObject({ code: '25006' });
      expect(pool.locator?.primary).toBeUndefined();
      client.release();
      // Discarded, not reused: the next query gets a new read-write connection.
      expect(pool.totalCount).toBe(0);
      const { rows } = await pool.query<{ ro: string }>("SELECT current_setting('transaction_read_only') AS ro");
      expect(rows[0]!.ro).toBe('off');
      expect(pool.locator?.primary).toBeDefined();
    } finally {
      await pool.end();
    }
  });

  it('drops a connection the server ended (57P01, as on a demotion) and forgets its host', async () => {
    const pool = createPool({ connectionString: twoHosts(), max: 2 });
    pool.on('error', () => undefined);
    try {
      const client = await pool.connect();
      client.on('error', () => undefined);
      const { rows } = await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      await pool.query('SELECT pg_terminate_backend($1)', [rows[0]!.pid]);
      await expect(client.query('SELECT 1')).rejects.toThrow();
      expect(pool.locator?.primary).toBeUndefined();
      client.release();
      expect(pool.totalCount).toBe(1);
      expect((await pool.query<{ n: number }>('SELECT 1 AS n')).rows[0]!.n).toBe(1);
    } finally {
      await pool.end();
    }
  });

  it('fails after failoverWaitMs, naming every host, when none is read-write', async () => {
    const pool = createPool({ connectionString: `postgres://u@127.0.0.1:${deadPort},127.0.0.1:${deadPort}/db`, failoverWaitMs: 300 });
    try {
      await expect(pool.query('SELECT 1')).rejects.toThrow(
        `no read-write Postgres server among 127.0.0.1:${deadPort}, 127.0.0.1:${deadPort}`,
      );
    } finally {
      await pool.end();
    }
  });
});
