import type { Registry } from 'prom-client';
import type { Health } from './health.ts';
import { OVERALL } from './health.ts';
import type { Readiness } from './readiness.ts';
import { serve, type Http1Handler } from './serve.ts';

/** Options of {@link startMetricsServer}. */
export interface MetricsServerOptions {
  /** TCP port; `0` picks a free one. Conventionally `BEDROCK_METRICS_PORT` (default 9464). */
  port: number;
  /** Interface to bind. Default `0.0.0.0`. */
  host?: string;
  registry: Registry;
  /** Mirrored by `/readyz`; without it `/readyz` answers 200 like `/healthz`. */
  health?: Health;
  /**
   * The dependencies the service needs to do its work (see readiness.ts): `/readyz` is 503
   * while one is down, naming it. Only with `health`.
   */
  readiness?: Readiness;
}

/** A running metrics server. */
export interface MetricsServer {
  readonly port: number;
  /** e.g. `http://127.0.0.1:9464`. */
  readonly url: string;
  close(): Promise<void>;
}

/**
 * Plain HTTP/1.1 (through serve()) for Prometheus scrapes and kubelet probes, apart from the
 * gRPC port so a busy or draining gRPC server never fails a scrape:
 * - `GET /metrics`: the registry in Prometheus text format.
 * - `GET /healthz`: liveness; 200 whenever the process can answer. It deliberately ignores
 *   the health holder: a dependency outage should drain a pod, not restart it.
 * - `GET /readyz`: readiness; 200 when the overall (`""`) status is SERVING and every
 *   dependency of `readiness` answers, else 503, with every status as JSON and, when a
 *   dependency is down, `reason` naming it (`redis: connection is reconnecting`).
 *   `/readyz?service=NAME` checks one name of the health holder (404 if unknown).
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const { registry, health, readiness } = options;
  const handler: Http1Handler = (req, res) => {
    const reply = (status: number, body: string, type = 'text/plain; charset=utf-8'): void => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('allow', 'GET, HEAD');
      return reply(405, 'method not allowed\n');
    }
    const url = new URL(req.url ?? '/', 'http://localhost');
    switch (url.pathname) {
      case '/metrics':
        registry.metrics().then(
          (text) => reply(200, text, registry.contentType),
          (err: unknown) => reply(500, `collecting metrics failed: ${String(err)}\n`),
        );
        return;
      case '/healthz':
        return reply(200, 'ok\n');
      case '/readyz': {
        if (!health) return reply(200, JSON.stringify({ status: 'SERVING' }), 'application/json');
        const service = url.searchParams.get('service') ?? OVERALL;
        const status = health.get(service);
        if (status === undefined) return reply(404, JSON.stringify({ error: `unknown service "${service}"` }), 'application/json');
        if (service !== OVERALL || !readiness) {
          const body = JSON.stringify({ service, status, services: health.list() });
          return reply(status === 'SERVING' ? 200 : 503, body, 'application/json');
        }
        readiness.check().then(
          (dependencies) => {
            const down = Object.entries(dependencies).filter(([, d]) => d.status !== 'SERVING');
            const ready = status === 'SERVING' && down.length === 0;
            const reasons = [
              ...(status === 'SERVING' ? [] : [`process: ${status} (starting or draining)`]),
              ...down.map(([name, d]) => `${name}: ${d.reason ?? d.status}`),
            ];
            const body = JSON.stringify({
              service,
              status: ready ? 'SERVING' : 'NOT_SERVING',
              ...(reasons.length ? { reason: reasons.join('; ') } : {}),
              services: health.list(),
              dependencies,
            });
            reply(ready ? 200 : 503, body, 'application/json');
          },
          (err: unknown) =>
            reply(
              503,
              JSON.stringify({ service, status: 'NOT_SERVING', reason: `readiness check failed: ${String(err)}` }),
              'application/json',
            ),
        );
        return;
      }
      default:
        return reply(404, 'not found: try /metrics, /healthz or /readyz\n');
    }
  };
  const server = await serve({ protocol: 'http1', host: options.host, port: options.port, handler });
  return {
    port: server.port,
    url: server.url,
    // Scrapers keep connections alive and a scrape is cheap to repeat: nothing here is worth waiting for.
    close: async () => {
      await server.close(0);
    },
  };
}
