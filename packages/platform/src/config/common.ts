/**
 * Settings every service shares, as config sections (see config.ts): the log level, the server
 * plumbing, the service identity files, and the transport (with Redis's settings). A service's
 * schema puts these sections next to its own; docs/configuration.md documents them once.
 */
import { z } from 'zod';
import {
  DEFAULT_COMPLETED_RETENTION_MS,
  DEFAULT_FAILED_RETENTION_MS,
  DEFAULT_JOB_LOCK_MS,
  DEFAULT_JOB_STALLED_INTERVAL_MS,
  DEFAULT_STREAM_MAX_LEN,
  DEFAULT_STREAM_TTL_MS,
} from '../defaults.ts';
import { DEFAULT_REDIS_PREFIX, DEFAULT_REDIS_URL } from '../redis/redis-transport-options.ts';
import { LOG_LEVELS } from '../server/logger.ts';
import { MAX_QUEUE_PARTITIONS } from '../redis/redis-keys.ts';
import { optionalSetting, section, setting, type SettingType } from './config.ts';
import { bool, duration, filePath, int, oneOf, port, str, url } from './types.ts';

export const logLevelSetting = setting('LOG_LEVEL', oneOf(LOG_LEVELS), {
  default: 'info',
  doc: 'Minimum level of the JSON log lines written to stdout.',
});

/** The host and metrics port every service serves on, and how long it drains at shutdown. */
export function serverSection<S extends z.ZodRawShape>(own: S) {
  return section({
    host: setting('BEDROCK_HOST', str('an interface address'), {
      default: '0.0.0.0',
      doc: 'Interface the servers bind to.',
    }),
    metricsPort: setting('BEDROCK_METRICS_PORT', port(), {
      default: 9464,
      doc: 'Port of the plain-HTTP server for /metrics, /healthz and /readyz (0 = any free port).',
    }),
    shutdownGrace: setting('BEDROCK_SHUTDOWN_GRACE', duration(), {
      default: 10_000,
      doc: 'How long in-flight calls and jobs may run after SIGTERM before they are aborted; keep it below the pod terminationGracePeriodSeconds.',
    }),
    ...own,
  });
}

/** This service's own token, sent on its calls to internal gRPC servers (clients of them only). */
export const serviceTokenFileSetting = optionalSetting('BEDROCK_SERVICE_TOKEN_FILE', filePath(), {
  doc: "File holding this service's own secret token (one line), sent as `authorization: Bearer <token>` on its calls to internal gRPC servers.",
});

/** Who may call this service's internal gRPC server (internal servers only). */
export const servicePeersFileSetting = optionalSetting('BEDROCK_SERVICE_PEERS_FILE', filePath(), {
  doc: 'File of `service:sha256hex` lines (SHA-256 of each accepted service token; # comments allowed): an internal gRPC server answers only these callers, plus health and reflection (unset: it refuses every other call).',
});

/** Redis, for queues, notification streams, the cancel channel and the registries. */
export const redisSection = section({
  url: setting('REDIS_URL', url({ protocols: ['redis', 'rediss'] }), {
    default: DEFAULT_REDIS_URL,
    doc: "Redis: a `redis://` or `rediss://` URL, with the service's own ACL user and password in production.",
  }),
  cluster: setting('BEDROCK_REDIS_CLUSTER', bool(), {
    default: false,
    doc: 'Redis is a Redis Cluster: `REDIS_URL` is one of its nodes (a seed; the others are found from it). See docs/transports.md, "Redis Cluster".',
  }),
  queuePartitions: setting('BEDROCK_QUEUE_PARTITIONS', int({ min: 1, max: MAX_QUEUE_PARTITIONS }), {
    default: 1,
    doc: 'Partitions of every queue, by conversation, each its own hash tag so a queue spreads over the masters of a Redis Cluster (1: one per queue, right for one Redis). Every process of a deployment must have the same value; change it only with the queues drained. See docs/transports.md, "Queue partitions".',
  }),
  prefix: setting('BEDROCK_REDIS_PREFIX', str('letters, digits, `.`, `_` or `-`'), {
    default: DEFAULT_REDIS_PREFIX,
    doc: 'Prefix of every key and channel; deployments sharing one Redis need different prefixes.',
  }),
  completedJobRetention: setting('BEDROCK_COMPLETED_JOB_RETENTION', duration({ min: 1 }), {
    default: DEFAULT_COMPLETED_RETENTION_MS,
    doc: 'Completed jobs (and so their ids, for de-duplication) are kept this long.',
  }),
  failedJobRetention: setting('BEDROCK_FAILED_JOB_RETENTION', duration({ min: 1 }), {
    default: DEFAULT_FAILED_RETENTION_MS,
    doc: 'Jobs that used up their attempts are kept this long.',
  }),
  streamMaxLen: setting('BEDROCK_STREAM_MAXLEN', int({ min: 1 }), {
    default: DEFAULT_STREAM_MAX_LEN,
    doc: 'Approximate entries kept per notification stream.',
  }),
  streamTtl: setting('BEDROCK_STREAM_TTL', duration({ min: 1 }), {
    default: DEFAULT_STREAM_TTL_MS,
    doc: 'A notification stream expires this long after its last event.',
  }),
  jobLock: setting('BEDROCK_JOB_LOCK', duration({ min: 100 }), {
    default: DEFAULT_JOB_LOCK_MS,
    doc: "Lock on a running job, renewed every quarter of it; a dead consumer's job is taken back within about lock + stalled interval. Also the run ledger's liveness window.",
  }),
  jobStalledInterval: setting('BEDROCK_JOB_STALLED_INTERVAL', duration({ min: 100 }), {
    default: DEFAULT_JOB_STALLED_INTERVAL_MS,
    doc: 'How often consumers look for jobs whose lock expired.',
  }),
  idleBlockingConnections: setting('BEDROCK_REDIS_IDLE_BLOCKING_CONNECTIONS', int({ min: 1, max: 64 }), {
    default: 4,
    doc: 'Idle dedicated connections kept for blocking stream reads.',
  }),
});

/** Queues and streams: in-process (`memory`) or Redis, with Redis's settings. */
export const transportSection = section({
  kind: setting('BEDROCK_TRANSPORT', oneOf(['redis', 'memory'] as const), {
    default: 'redis',
    doc: 'Queues and streams: `redis` (BullMQ/Redis, distributed) or `memory` (in-process, single-process only).',
  }),
  redis: redisSection,
});

export type TransportConfig = z.output<typeof transportSection>;
export type RedisConfig = z.output<typeof redisSection>;

/** The settings every service shares, for docs/configuration.md (each service's schema has them in its own places). */
export const commonConfigDocs = section({
  log: section({ level: logLevelSetting }),
  server: serverSection({}),
  serviceTokenFile: serviceTokenFileSetting,
  servicePeersFile: servicePeersFileSetting,
});

/** An inclusive range of uids, written `FIRST-LAST`. */
export interface UidRange {
  readonly first: number;
  readonly last: number;
}

function uidRange(): SettingType<UidRange> {
  return {
    expected: 'a range of uids FIRST-LAST (1000 to 4294967294)',
    schema: z
      .unknown()
      .transform((value, ctx) => {
        if (typeof value !== 'string') return value;
        const match = /^\s*(\d{1,10})\s*-\s*(\d{1,10})\s*$/.exec(value);
        if (match) return { first: Number(match[1]), last: Number(match[2]) };
        ctx.addIssue({ code: 'custom', message: 'not FIRST-LAST' });
        return z.NEVER;
      })
      .pipe(
        z
          .object({ first: z.number().int().min(1000), last: z.number().int().max(4_294_967_294) })
          .refine((r) => r.first <= r.last, 'FIRST is above LAST'),
      ),
    format: (r) => `${r.first}-${r.last}`,
  };
}

/**
 * The uids given to users' tools, one per user (docs/workspaces.md): the conversation service
 * allocates from it, and a tool-runner runs no job's tool as a uid outside it. Both read the
 * same variable, so set it once for the deployment.
 */
export const toolUidRangeSetting = setting('BEDROCK_TOOL_UIDS', uidRange(), {
  default: { first: 200_000, last: 299_999 },
  doc: "Uids given to users' tools, one per user and never reused (each user's gid is the same number); outside the host's own users and subordinate-uid ranges. The tool-runners run no tool as a uid outside it.",
});
