import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter, HandlerContext } from '@connectrpc/connect';
import { health as pb } from '@bedrock/contracts';

/** What a service reports about itself. */
export type ServingStatus = 'SERVING' | 'NOT_SERVING';

/** The name of the overall status of the process in gRPC health checking. */
export const OVERALL = '';

/**
 * Serving statuses by service name. `""` is the whole process; other names are usually
 * fully-qualified gRPC service names (`bedrock.v1.ConversationService`) or a dependency
 * a service wants to expose (`postgres`).
 */
export interface Health {
  /** Sets a status and notifies watchers if it changed. Ignored after {@link shutdown}. */
  set(service: string, status: ServingStatus): void;
  /** The status, or `undefined` for a name never set. */
  get(service: string): ServingStatus | undefined;
  /** A snapshot of every known status. */
  list(): Record<string, ServingStatus>;
  /** Calls `listener` on every change of `service` (not with the current value); returns an unsubscribe. */
  watch(service: string, listener: (status: ServingStatus) => void): () => void;
  /**
   * Marks every service NOT_SERVING and ignores later `set` calls: call it first on
   * SIGTERM so load balancers and watchers drain the process before the server closes.
   */
  shutdown(): void;
}

/** Options of {@link createHealth}. */
export interface HealthOptions {
  /** Initial overall (`""`) status. Default SERVING, as gRPC servers do. */
  overall?: ServingStatus;
}

/** Creates the status holder shared by the gRPC Health service and `/readyz`. */
export function createHealth(options: HealthOptions = {}): Health {
  const statuses = new Map<string, ServingStatus>([[OVERALL, options.overall ?? 'SERVING']]);
  const listeners = new Map<string, Set<(status: ServingStatus) => void>>();
  let shutDown = false;

  function update(service: string, status: ServingStatus): void {
    if (statuses.get(service) === status) return;
    statuses.set(service, status);
    for (const listener of listeners.get(service) ?? []) listener(status);
  }

  return {
    set(service, status) {
      if (!shutDown) update(service, status);
    },
    get: (service) => statuses.get(service),
    list: () => Object.fromEntries(statuses),
    watch(service, listener) {
      let set = listeners.get(service);
      if (!set) listeners.set(service, (set = new Set()));
      set.add(listener);
      return () => {
        set.delete(listener);
        if (set.size === 0) listeners.delete(service);
      };
    },
    shutdown() {
      for (const service of statuses.keys()) update(service, 'NOT_SERVING');
      shutDown = true;
    },
  };
}

const toProto = {
  SERVING: pb.HealthCheckResponse_ServingStatus.SERVING,
  NOT_SERVING: pb.HealthCheckResponse_ServingStatus.NOT_SERVING,
} as const;

function response(status: pb.HealthCheckResponse_ServingStatus): pb.HealthCheckResponse {
  return create(pb.HealthCheckResponseSchema, { status });
}

/**
 * Serves `grpc.health.v1.Health` from `health`: Check (NOT_FOUND for an unknown name),
 * Watch (current status at once, then every change; SERVICE_UNKNOWN while unknown, without
 * ending the call) and List. Kubernetes gRPC probes and `grpc_health_probe` use Check.
 */
export function registerHealth(router: ConnectRouter, health: Health): void {
  router.service(pb.Health, {
    check(req) {
      const status = health.get(req.service);
      if (status === undefined) throw new ConnectError(`unknown service "${req.service}"`, Code.NotFound);
      return response(toProto[status]);
    },
    list() {
      const statuses: Record<string, pb.HealthCheckResponse> = {};
      for (const [service, status] of Object.entries(health.list())) statuses[service] = response(toProto[status]);
      return create(pb.HealthListResponseSchema, { statuses });
    },
    watch: (req, ctx) => watch(health, req.service, ctx),
  });
}

async function* watch(health: Health, service: string, ctx: HandlerContext): AsyncGenerator<pb.HealthCheckResponse> {
  // Changes queue up between yields so a fast flip (SERVING -> NOT_SERVING -> SERVING)
  // is delivered in order rather than collapsed to its last value.
  const pending: ServingStatus[] = [];
  let wake: (() => void) | undefined;
  const unsubscribe = health.watch(service, (status) => {
    pending.push(status);
    wake?.();
  });
  const onAbort = (): void => wake?.();
  ctx.signal.addEventListener('abort', onAbort);
  try {
    const current = health.get(service);
    yield response(current === undefined ? pb.HealthCheckResponse_ServingStatus.SERVICE_UNKNOWN : toProto[current]);
    for (;;) {
      while (pending.length === 0 && !ctx.signal.aborted) {
        await new Promise<void>((resolve) => (wake = resolve));
        wake = undefined;
      }
      // A client cancel or server shutdown: end with that status (UNAVAILABLE on shutdown
      // tells clients to reconnect elsewhere, as the health protocol asks).
      if (ctx.signal.aborted) throw ConnectError.from(ctx.signal.reason, Code.Unavailable);
      const status = pending.shift() as ServingStatus;
      yield response(toProto[status]);
    }
  } finally {
    unsubscribe();
    ctx.signal.removeEventListener('abort', onAbort);
  }
}
