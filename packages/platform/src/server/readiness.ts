/**
 * Readiness that reflects a service's dependencies: `/readyz` answers 503 naming the dependency that is down
 * (Redis, Postgres, the conversation service) as well as when the process itself is starting or draining.
 * Liveness (`/healthz`) never looks here: a dependency outage takes a pod out of its Service, it does not
 * restart it (docs/observability.md, "Health").
 */
import { createClient, type Transport as ConnectTransport } from '@connectrpc/connect';
import { health as pb } from '@bedrock/contracts';

/** One dependency: resolves when it can do its work, rejects (with the reason) when not. */
export interface DependencyCheck {
  /** Named in the `/readyz` body: `redis`, `postgres`, `conversation`. */
  readonly name: string;
  check(signal: AbortSignal): Promise<void>;
}

export interface DependencyStatus {
  readonly status: 'SERVING' | 'NOT_SERVING';
  /** Why NOT_SERVING (the error message, or "timed out after N ms"). */
  readonly reason?: string;
}

export interface Readiness {
  /** Every dependency's status, fresh or at most `cacheMs` old. */
  check(): Promise<Record<string, DependencyStatus>>;
}

export interface ReadinessOptions {
  readonly checks: readonly DependencyCheck[];
  /** How long an outcome is reused, ms. Default {@link READINESS_CACHE_MS}. */
  readonly cacheMs?: number;
  /** How long a probe waits for one check, ms. Default {@link READINESS_TIMEOUT_MS}. */
  readonly timeoutMs?: number;
  /** Clock (tests). */
  readonly now?: () => number;
}

export const READINESS_CACHE_MS = 1_500;
export const READINESS_TIMEOUT_MS = 1_000;

interface Slot {
  readonly dep: DependencyCheck;
  result?: DependencyStatus;
  at: number;
  inFlight?: Promise<DependencyStatus>;
}

function message(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * A probe is cheap: each check's outcome is kept for `cacheMs`, a check runs at most once at a time (a
 * probe arriving while one is in flight waits for that one, never starts another, so a hanging dependency
 * cannot pile up connections), and a probe waits at most `timeoutMs`.
 */
export function createReadiness(options: ReadinessOptions): Readiness {
  const cacheMs = options.cacheMs ?? READINESS_CACHE_MS;
  const timeoutMs = options.timeoutMs ?? READINESS_TIMEOUT_MS;
  const now = options.now ?? Date.now;
  const slots: Slot[] = options.checks.map((dep) => ({ dep, at: -Infinity }));

  function run(slot: Slot): Promise<DependencyStatus> {
    if (slot.result && now() - slot.at < cacheMs) return Promise.resolve(slot.result);
    if (!slot.inFlight) {
      const controller = new AbortController();
      // The check's own deadline is a little longer than the probe's wait: a slow answer still
      // lands in the cache for the next probe.
      const timer = setTimeout(() => controller.abort(new Error(`timed out after ${timeoutMs * 2} ms`)), timeoutMs * 2);
      timer.unref?.();
      slot.inFlight = slot.dep
        .check(controller.signal)
        .then(
          (): DependencyStatus => ({ status: 'SERVING' }),
          (err: unknown): DependencyStatus => ({ status: 'NOT_SERVING', reason: message(err) }),
        )
        .then((result) => {
          clearTimeout(timer);
          slot.result = result;
          slot.at = now();
          slot.inFlight = undefined;
          return result;
        });
    }
    const inFlight = slot.inFlight;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<DependencyStatus>((resolve) => {
      timer = setTimeout(() => resolve({ status: 'NOT_SERVING', reason: `timed out after ${timeoutMs} ms` }), timeoutMs);
    });
    return Promise.race([inFlight, timeout]).finally(() => clearTimeout(timer));
  }

  return {
    async check() {
      const results = await Promise.all(slots.map(run));
      return Object.fromEntries(slots.map((slot, i) => [slot.dep.name, results[i] as DependencyStatus]));
    },
  };
}

/**
 * A dependency that is another of our services: its `grpc.health.v1.Health/Check` for
 * `service` (default `""`, the whole process: SERVING once started, NOT_SERVING while it
 * drains) must answer SERVING. Health checking needs no service token.
 */
export function grpcHealthCheck(name: string, transport: ConnectTransport, service = ''): DependencyCheck {
  const client = createClient(pb.Health, transport);
  return {
    name,
    async check(signal) {
      const res = await client.check({ service }, { signal });
      if (res.status !== pb.HealthCheckResponse_ServingStatus.SERVING) {
        throw new Error(`health status ${pb.HealthCheckResponse_ServingStatus[res.status] ?? res.status}`);
      }
    },
  };
}

/**
 * The dependency on Redis behind a transport (its `ping`). `transport` is read at each probe,
 * so a service may build its transport after its metrics server; include this check only when
 * the transport is Redis (an in-process transport has nothing to be unreachable).
 */
export function redisCheck(transport: () => { ping?(): Promise<void> } | undefined): DependencyCheck {
  return {
    name: 'redis',
    async check() {
      const t = transport();
      if (!t) throw new Error('not connected yet');
      await t.ping?.();
    },
  };
}

/** Postgres answers `SELECT 1` (through the service's pool: a pool that cannot connect fails). */
export function postgresCheck(pool: { query(sql: string): Promise<unknown> }): DependencyCheck {
  return { name: 'postgres', check: async () => void (await pool.query('SELECT 1')) };
}
