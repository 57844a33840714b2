import { pino } from 'pino';
import type { DestinationStream, Logger as PinoLogger } from 'pino';

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
 * plus whatever fields the call or its child loggers add (see {@link withContext}).
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
      errorKey: 'err',
    },
    options.destination ?? pino.destination({ dest: 1, sync: true }),
  );
}

/** Parses a `LOG_LEVEL` value; unset or empty means `info`. */
export function parseLogLevel(raw: string | undefined): LogLevel {
  if (raw === undefined || raw.trim() === '') return 'info';
  const level = raw.trim().toLowerCase();
  if ((LOG_LEVELS as readonly string[]).includes(level)) return level as LogLevel;
  throw new Error(`LOG_LEVEL: expected one of ${LOG_LEVELS.join(', ')}, got "${raw}"`);
}

/** Correlation fields carried by child loggers; snake_case because they are log field names. */
export interface LogContext {
  /** The conversation a line is about. */
  conversationId?: string;
  /** The RPC or job that caused the line (a request id, job id or effect id). */
  requestId?: string;
  /** Any other fields to repeat on every line. */
  [field: string]: unknown;
}

/**
 * A child logger whose every line carries `conversation_id` / `request_id` (and any other
 * given fields), so one conversation or request can be followed across services with a
 * single log query. Undefined values are left out.
 */
export function withContext(logger: Logger, context: LogContext): Logger {
  const bindings: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(context)) {
    if (value === undefined) continue;
    if (key === 'conversationId') bindings.conversation_id = value;
    else if (key === 'requestId') bindings.request_id = value;
    else bindings[key] = value;
  }
  return logger.child(bindings);
}
