/** A fresh PostgreSQL database per test file on the real server (never a mock): `@bedrock/testkit/database`. */
import pg from 'pg';

export const ADMIN_URL = process.env.BEDROCK_TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

export interface TestDatabase {
  readonly url: string;
  readonly name: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(label: string): Promise<TestDatabase> {
  const name = `bedrock_${label.replace(/[^a-z0-9]/gi, '_').toLowerCase()}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new pg.Client({ connectionString: ADMIN_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const c = new pg.Client({ connectionString: ADMIN_URL });
      await c.connect();
      try {
        // A pool's `end()` resolves once its clients are told to close, not once their backends
        // have gone. Forcing the drop while one is still closing sends that client a FATAL
        // 57P01, which an idle pool client re-emits as an unhandled 'error' on its pool. So wait
        // (briefly) for the test's own connections to leave, and force only what remains.
        const deadline = Date.now() + 2000;
        while (Date.now() < deadline) {
          const { rows } = await c.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1', [name]);
          if (rows[0]!.n === 0) break;
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
