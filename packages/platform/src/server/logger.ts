import { pino } from 'pino';
import type { DestinationStream, Logger as PinoLogger } from 'pino';
import { activeTraceLogFields } from './spans.ts';

/** A structured logger: pino's API (`logger.info({ key: value }, 'message')`). */
export type Logger = PinoLogger;

/** Levels accepted by `LOG_LEVEL`, most verbose first. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** Written as the `service` field of every line, e.g. `conversation`. */
  service: string;
  /** Minimum level written. Default: `LOG_LEVEL` from the environment, else `info`. */
  level?: LogLevel;
  /** Where lines go. Default stdout (synchronous, so nothing is lost on exit). */
  destination?: DestinationStream;
}

/**
 * Creates the root logger of a service. Each line is one JSON object:
 * `{"level":"info","time":"2026-01-01T00:00:00.000Z","service":"conversation","pid":1,"msg":"..."}`
 * plus `trace_id` / `span_id` of the active span (when tracing is on) and whatever fields the
 * call or its child loggers add, named in snake_case (`conversation_id`, `job_id`,
 * `tool_use_id`, `request_id`: docs/observability.md, "Logs").
 * An unknown `LOG_LEVEL` throws rather than silently logging at the wrong level.
 */
export function createLogger(options: LoggerOptions): Logger {
  const level = options.level ?? parseLogLevel(process.env.LOG_LEVEL);
  return pino(
    {
      level,
      base: { service: options.service, pid: process.pid },
      // Level names instead of pino's numbers so humans and log queries read "warn", not 40.
      formatters: { level: (label) => ({ level: label }) },
      timestamp: pino.stdTimeFunctions.isoTime,
      messageKey: 'msg',
      // The active span's ids on every line, so a line can be joined to its trace.
      mixin: activeTraceLogFields,
      errorKey: 'err',
      serializers: { err: serializeError },
    },
    options.destination ?? pino.destination({ dest: 1, sync: true }),
  );
}

/**
 * pino's error serializer (type, message, stack, causes and the error's own fields), without the
 * objects an error carries: a pg error's `client` (the whole connection, its statements and
 * buffers: a 20 KB line per idle connection at a failover), a socket, a request. Plain values
 * (`code`, `detail`, `errno`) and arrays stay.
 */
export function serializeError(err: unknown): unknown {
  if (!(err instanceof Error)) return err;
  const out = pino.stdSerializers.err(err) as unknown as Record<string, unknown>;
  for (const [key, value] of Object.entries(out))
    if (key !== 'cause' && value !== null && typeof value === 'object' && !Array.isArray(value)) delete out[key];
  return out;
}

/** Parses a `LOG_LEVEL` value; unset or empty means `info`. */
export function parseLogLevel(raw: string | undefined): LogLevel {
  if (raw === undefined || raw.trim() === '') return 'info';
  const level = raw.trim().toLowerCase();
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel;
  throw new Error(`LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
}
