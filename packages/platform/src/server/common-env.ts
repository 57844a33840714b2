import { duration, oneOf, optional, port, setting, str, type EnvParser } from './env.ts';
import { LOG_LEVELS } from './logger.ts';

/** A path, as given (the service reads the file at start). */
function filePath(): EnvParser<string> {
  return { expected: 'a file path', parse: (raw) => raw };
}

/**
 * Settings shared by the services; a service spreads (or picks) these into its own spec:
 * `readEnv({ ...commonEnv, grpcPort: setting({...}) })`. The service-identity pair is declared
 * only where it is used: the token file by clients of internal servers (web-bff), the peers
 * file by internal servers (conversation, tool-runner). Documented in docs/configuration.md.
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
  // Service identity: declared only by the services that use them (see docs/deploy.md).
  serviceTokenFile: setting({
    name: 'BEDROCK_SERVICE_TOKEN_FILE',
    parse: optional(filePath()),
    default: undefined,
    doc: "File holding this service's own secret token (one line), sent as `authorization: Bearer <token>` on its calls to internal gRPC servers.",
  }),
  servicePeersFile: setting({
    name: 'BEDROCK_SERVICE_PEERS_FILE',
    parse: optional(filePath()),
    default: undefined,
    doc: 'File of `service:sha256hex` lines (SHA-256 of each accepted service token; # comments allowed): an internal gRPC server answers only these callers, plus health and reflection (unset: it refuses every other call).',
  }),
};
