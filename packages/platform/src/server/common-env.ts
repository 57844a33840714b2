import { duration, oneOf, port, setting, str } from './env.ts';
import { LOG_LEVELS } from './logger.ts';

/**
 * Settings every service reads; a service spreads these into its own spec:
 * `readEnv({ ...commonEnv, grpcPort: setting({...}) })`. Documented in docs/configuration.md.
 */
export const commonEnv = {
  logLevel: setting({
    name: 'LOG_LEVEL',
    parse: oneOf(LOG_LEVELS),
    default: 'info',
    doc: 'Minimum level of the JSON log lines written to stdout.',
  }),
  host: setting({
    name: 'BEDROCK_HOST',
    parse: str(),
    default: '0.0.0.0',
    doc: 'Interface the gRPC and metrics servers bind to.',
  }),
  metricsPort: setting({
    name: 'BEDROCK_METRICS_PORT',
    parse: port(),
    default: 9464,
    doc: 'Port of the plain-HTTP server for /metrics, /healthz and /readyz (0 = any free port).',
  }),
  shutdownGraceMs: setting({
    name: 'BEDROCK_SHUTDOWN_GRACE',
    parse: duration(),
    default: 10_000,
    doc: 'How long in-flight calls and jobs may run after SIGTERM before they are aborted; keep it below the pod terminationGracePeriodSeconds.',
  }),
};
