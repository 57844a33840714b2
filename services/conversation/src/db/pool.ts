/**
 * The Postgres pool, following the primary of a replicated cluster (docs/conversation.md,
 * "Postgres failover"). `DATABASE_URL` may name several hosts, as libpq allows; node-postgres
 * takes one only, hence this file. With several, each new connection first finds the read-write
 * host, and a connection to a primary that went away is dropped; with one, a plain `pg.Pool`.
 * A failed statement is not retried here: only the caller knows whether that is safe.
 */
import pg from 'pg';

export interface PgHost {
  readonly host: string;
  readonly port: number;
}

export interface PostgresUrl {
  readonly hosts: readonly PgHost[];
  /** The same URL naming one of its hosts (and without target_session_attrs, which pg ignores). */
  urlFor(host: PgHost): string;
}

const URL_RE = /^(postgres(?:ql)?:\/\/)([^@/?#]*@)?([^/?#]*)(.*)$/i;

/** Splits a postgres URL with one or several comma-separated `host[:port]` (IPv6 in brackets). */
export function parsePostgresUrl(raw: string): PostgresUrl {
  const m = URL_RE.exec(raw);
  if (!m) throw new Error('not a postgres:// or postgresql:// URL');
  const [, scheme, auth = '', hostList = '', rest = ''] = m as unknown as [string, string, string | undefined, string, string];
  const hosts = hostList.split(',').map((part): PgHost => {
    const hp = /^(\[[^\]]+\]|[^:]*)(?::(\d+))?$/.exec(part.trim());
    if (!hp || hp[1] === '') throw new Error(`bad host ${JSON.stringify(part)}`);
    const port = hp[2] === undefined ? 5432 : Number(hp[2]);
    if (port < 1 || port > 65535) throw new Error(`bad port in ${JSON.stringify(part)}`);
    return { host: hp[1]!.replace(/^\[(.*)\]$/, '$1'), port };
  });
  // target_session_attrs is what this file does; any other parameter is kept.
  const [path = '', query] = rest.split('?', 2) as [string, string | undefined];
  const params = new URLSearchParams(query ?? '');
  const attrs = params.get('target_session_attrs');
  if (attrs !== null && attrs !== 'read-write' && attrs !== 'primary' && attrs !== 'any')
    throw new Error(`target_session_attrs=${attrs} is not supported (read-write, primary or any)`);
  params.delete('target_session_attrs');
  const tail = path + (params.size > 0 ? `?${params.toString()}` : '');
  return {
    hosts,
    urlFor: (h) => `${scheme}${auth}${h.host.includes(':') ? `[${h.host}]` : h.host}:${h.port}${tail}`,
  };
}

export interface PoolOptions {
  readonly connectionString: string;
  readonly max?: number;
  /** How long a new connection waits for a read-write host to appear, ms. Default 30 s. */
  readonly failoverWaitMs?: number;
  /** Timeout of one probe of one host, ms. Default 2 s. */
  readonly probeTimeoutMs?: number;
  /** Told when the pool's connections move to another host (and when none answers). */
  readonly onPrimary?: (event: { host: string; previous: string | undefined }) => void;
}

/**
 * Server errors after which the connection's host is looked up again: 57P0x, the server ends the
 * connection (kill, demotion and restart as a standby: 57P01), and 25006, a server that became
 * read-only. Such a statement ends its connection here at once, so the pool discards it on release.
 */
const GONE = new Set(['25006', '57P01', '57P02', '57P03']);

/**
 * Finds the read-write host of a list; shared by the connections of one pool. It asks the host
 * that answered last, then the others in order, each `pg_is_in_recovery()` and
 * `transaction_read_only` over a short-lived connection (as libpq's target_session_attrs does);
 * while none answers (a failover under way) it tries again with back-off, up to `failoverWaitMs`,
 * so a caller waits for the new primary rather than failing at once.
 */
export class PrimaryLocator {
  private current: PgHost | undefined;
  /** The last host found read-write, kept when forgotten: to tell a move from the first find. */
  private last: PgHost | undefined;
  private finding: Promise<PgHost> | undefined;

  constructor(
    private readonly url: PostgresUrl,
    private readonly options: { failoverWaitMs: number; probeTimeoutMs: number; onPrimary?: PoolOptions['onPrimary'] },
  ) {}

  /** The host that answered read-write last, if any (for logs and tests). */
  get primary(): PgHost | undefined {
    return this.current;
  }

  /** Forgets `host` as the primary (its connection failed or it turned read-only). */
  forget(host: PgHost): void {
    if (this.current && this.current.host === host.host && this.current.port === host.port) this.current = undefined;
  }

  /** The read-write host; concurrent callers share one search. */
  find(): Promise<PgHost> {
    this.finding ??= this.search().finally(() => (this.finding = undefined));
    return this.finding;
  }

  private async search(): Promise<PgHost> {
    const deadline = Date.now() + this.options.failoverWaitMs;
    let delay = 100;
    for (;;) {
      const failures: string[] = [];
      const order = this.current ? [this.current, ...this.url.hosts.filter((h) => h !== this.current)] : this.url.hosts;
      for (const host of order) {
        const verdict = await this.probe(host);
        if (verdict === 'read-write') {
          const previous = this.last;
          this.current = this.last = host;
          if (previous !== host) this.options.onPrimary?.({ host: label(host), previous: previous && label(previous) });
          return host;
        }
        failures.push(`${label(host)}: ${verdict}`);
      }
      this.current = undefined;
      if (Date.now() + delay > deadline)
        throw new Error(`no read-write Postgres server among ${this.url.hosts.map(label).join(', ')} (${failures.join('; ')})`);
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 1000);
    }
  }

  private async probe(host: PgHost): Promise<string> {
    const client = new pg.Client({ connectionString: this.url.urlFor(host), connectionTimeoutMillis: this.options.probeTimeoutMs });
    client.on('error', () => undefined);
    try {
      await client.connect();
      const { rows } = await client.query<{ standby: boolean; read_only: string }>(
        "SELECT pg_is_in_recovery() AS standby, current_setting('transaction_read_only') AS read_only",
      );
      const row = rows[0]!;
      return row.standby ? 'a standby' : row.read_only === 'on' ? 'read-only' : 'read-write';
    } catch (err) {
      return err instanceof Error ? err.message || err.name : String(err);
    } finally {
      await client.end().catch(() => undefined);
    }
  }
}

const label = (h: PgHost) => `${h.host}:${h.port}`;

export interface FollowingPool extends pg.Pool {
  /** Set when DATABASE_URL names several hosts. */
  readonly locator?: PrimaryLocator;
}

/** A `pg.Pool`: plain for one host, following the read-write host for several. */
export function createPool(options: PoolOptions): FollowingPool {
  const url = parsePostgresUrl(options.connectionString);
  if (url.hosts.length === 1) return new pg.Pool({ connectionString: options.connectionString, max: options.max });
  const locator = new PrimaryLocator(url, {
    failoverWaitMs: options.failoverWaitMs ?? 30_000,
    probeTimeoutMs: options.probeTimeoutMs ?? 2_000,
    ...(options.onPrimary ? { onPrimary: options.onPrimary } : {}),
  });

  class FollowingClient extends pg.Client {
    private target: PgHost | undefined;

    override connect(): Promise<pg.Client>;
    override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
    override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
      const connecting = (async () => {
        const target = await locator.find();
        this.target = target;
        const self = this as unknown as { host: string; port: number; connectionParameters: { host: string; port: number } };
        self.host = self.connectionParameters.host = target.host;
        self.port = self.connectionParameters.port = target.port;
        this.on('error', () => locator.forget(target));
        try {
          await super.connect();
        } catch (err) {
          locator.forget(target);
          throw err;
        }
        return this;
      })();
      if (!callback) return connecting;
      const done = callback as (err: Error | null, c?: pg.Client) => void;
      connecting.then(
        (client) => done(null, client),
        (err: Error) => done(err),
      );
    }

    /**
     * Inspects every failed statement: one that says the server is no longer the primary drops
     * this connection and forgets its host, so the next connection looks again. (When the server
     * itself ends a connection, node-postgres marks the client unusable and the pool discards it,
     * idle or not.)
     */
    private noteError(err: unknown): void {
      const code = (err as { code?: unknown } | null)?.code;
      if (typeof code !== 'string' || !GONE.has(code) || !this.target) return;
      locator.forget(this.target);
      // Ended, the client is discarded by the pool on release instead of being reused (for
      // 57P0x the server closes it too, but the error can reach the caller before the close).
      void this.end().catch(() => undefined);
    }

    override query(...args: unknown[]): never {
      const last = args.length - 1;
      if (typeof args[last] === 'function') {
        const callback = args[last] as (err: Error | undefined, result: unknown) => void;
        args[last] = (err: Error | undefined, result: unknown) => {
          if (err) this.noteError(err);
          callback(err, result);
        };
      }
      const result = (super.query as (...a: unknown[]) => unknown)(...args);
      if (result && typeof (result as Promise<unknown>).then === 'function')
        return (result as Promise<unknown>).catch((err: unknown) => {
          this.noteError(err);
          throw err;
        }) as never;
      return result as never;
    }
  }

  const pool = new pg.Pool({ connectionString: url.urlFor(url.hosts[0]!), max: options.max, Client: FollowingClient }) as FollowingPool;
  Object.defineProperty(pool, 'locator', { value: locator });
  return pool;
}
