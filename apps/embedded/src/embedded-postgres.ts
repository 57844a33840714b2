/**
 * PostgreSQL embedded in the process for the single-command default: PGlite (Postgres
 * compiled to WebAssembly) with its data in a directory, served by pglite-socket on a unix
 * socket in that directory so the service reaches it with the same `pg` code as a real
 * server. PGlite has one session, so the pool has exactly one connection: transactions of
 * different callers then queue instead of interleaving.
 */
import { mkdirSync, rmSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { btree_gin } from '@electric-sql/pglite/contrib/btree_gin';
import { pg_trgm } from '@electric-sql/pglite/contrib/pg_trgm';
import { PGLiteSocketServer } from '@electric-sql/pglite-socket';

export interface EmbeddedPostgres {
  /** A pool of one connection to the embedded database. */
  readonly pool: pg.Pool;
  /** Directory holding the data and the socket. */
  readonly dataDir: string;
  stop(): Promise<void>;
}

/** libpq's socket file name for port 5432; `pg` connects to `host=<dir>` with that port. */
const SOCKET_PORT = 5432;

export async function startEmbeddedPostgres(dir: string): Promise<EmbeddedPostgres> {
  const dataDir = join(dir, 'pgdata');
  mkdirSync(dataDir, { recursive: true });
  const socketDir = join(dir, 'run');
  mkdirSync(socketDir, { recursive: true });
  const socketPath = join(socketDir, `.s.PGSQL.${SOCKET_PORT}`);
  // A socket left by a process that was killed would make listen() fail.
  if (existsSync(socketPath)) rmSync(socketPath);
  // pg_trgm and btree_gin: the index of title search (migration 006), as on a real server.
  const db = await PGlite.create(dataDir, { extensions: { pg_trgm, btree_gin } });
  const server = new PGLiteSocketServer({ db, path: socketPath });
  await server.start();
  const pool = new pg.Pool({ host: socketDir, port: SOCKET_PORT, user: 'postgres', database: 'postgres', max: 1 });
  return {
    pool,
    dataDir,
    async stop() {
      await pool.end();
      await server.stop();
      await db.close();
    },
  };
}
