/**
 * The value types of settings (see config.ts). Each accepts the text of an environment variable
 * or, from code, a value of its type; durations are milliseconds and sizes bytes in code, and are
 * written with a unit in the environment (`30s`, `64MiB`).
 */
import { isAbsolute } from 'node:path';
import { z } from 'zod';
import type { SettingType } from './config.ts';
import { parseSecretKey } from '../server/secret-box.ts';

/**
 * A schema that parses text (from the environment) with `parse`, which throws with a short
 * reason, and takes anything else (a value from code) as is; either way `code` checks the result.
 */
function textOr<T>(code: z.ZodType<T, unknown>, parse: (raw: string) => unknown): z.ZodType<T, unknown> {
  return z
    .unknown()
    .transform((value, ctx) => {
      if (typeof value !== 'string') return value;
      try {
        return parse(value);
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
        return z.NEVER;
      }
    })
    .pipe(code) as z.ZodType<T, unknown>;
}

/** Any non-empty string. */
export function str(expected = 'a string'): SettingType<string> {
  return { expected, schema: z.string().min(1) };
}

/** An absolute path. */
export function path(): SettingType<string> {
  return { expected: 'an absolute path', schema: z.string().refine(isAbsolute, 'not an absolute path') };
}

/** A file path, as given (the service reads the file at start). */
export function filePath(): SettingType<string> {
  return { expected: 'a file path', schema: z.string().min(1) };
}

/** A base-10 integer within [min, max] (defaults: the safe-integer range). */
export function int(options: { min?: number; max?: number } = {}): SettingType<number> {
  const min = options.min ?? Number.MIN_SAFE_INTEGER;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  const range = options.min !== undefined || options.max !== undefined ? ` ${options.min ?? '..'}..${options.max ?? ''}` : '';
  const number = z.number().int().min(min, 'out of range').max(max, 'out of range');
  return {
    expected: `an integer${range}`,
    schema: textOr(number, (raw) => {
      if (!/^[+-]?\d+$/.test(raw)) throw new Error('not an integer');
      return Number(raw);
    }),
  };
}

/** A TCP port, 0..65535 (0 = pick a free one). */
export function port(): SettingType<number> {
  return { ...int({ min: 0, max: 65535 }), expected: 'a port 0..65535' };
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

/** true/false, 1/0, yes/no, on/off (any case). */
export function bool(): SettingType<boolean> {
  return {
    expected: 'true or false',
    schema: textOr(z.boolean(), (raw) => {
      const v = raw.toLowerCase();
      if (TRUE.has(v) || FALSE.has(v)) return TRUE.has(v);
      throw new Error('not a boolean');
    }),
  };
}

/** One of a fixed set of strings (case-sensitive). */
export function oneOf<const T extends string>(values: readonly T[]): SettingType<T> {
  return { expected: `one of ${values.join(', ')}`, schema: z.enum(values as unknown as [T, ...T[]]) as unknown as z.ZodType<T, unknown> };
}

/** An absolute URL, optionally restricted to some schemes (without the colon); kept as its text. */
export function url(options: { protocols?: readonly string[] } = {}): SettingType<string> {
  const protocols = options.protocols;
  return {
    expected: protocols ? `a ${protocols.join('/')} URL` : 'an absolute URL',
    schema: z.string().superRefine((raw, ctx) => {
      let parsed: URL;
      try {
        parsed = new URL(raw);
      } catch {
        ctx.addIssue({ code: 'custom', message: 'not a URL' });
        return;
      }
      if (protocols && !protocols.includes(parsed.protocol.slice(0, -1)))
        ctx.addIssue({ code: 'custom', message: `scheme ${parsed.protocol} not allowed` });
    }),
    // Credentials in a default would end up in generated docs; show them masked.
    format: (value) => {
      const parsed = new URL(value);
      return parsed.password ? Object.assign(parsed, { password: '***' }).href : value;
    },
  };
}

/** A comma-separated list (blanks around commas ignored) of items of one type; from code, an array. */
export function list<T>(item: SettingType<T>, options: { min?: number } = {}): SettingType<readonly T[]> {
  const items = z.array(item.schema).min(options.min ?? 0, 'too few items');
  return {
    expected: `${item.expected.replace(/^an? /, '')}s, comma-separated`,
    schema: textOr(items as unknown as z.ZodType<readonly T[], unknown>, (raw) =>
      raw
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== ''),
    ),
    format: (values) => values.map((v) => (item.format ? item.format(v) : String(v))).join(','),
  };
}

const DURATION_UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration: `500ms`, `30s`, `1.5s`, `5m`, `1h` in the environment; milliseconds in code. */
export function duration(options: { min?: number } = {}): SettingType<number> {
  const min = options.min ?? 0;
  return {
    expected: `a duration with its unit (ms, s, m, h), such as 500ms, 30s, 5m${min > 0 ? `, at least ${formatDuration(min)}` : ''}`,
    schema: textOr(
      z
        .number()
        .int()
        .min(min, `at least ${formatDuration(min)}`),
      (raw) => {
        const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(raw);
        if (!match) throw new Error('write the unit: 500ms, 30s, 5m, 1h');
        return Math.round(Number(match[1]) * DURATION_UNITS[match[2]!]!);
      },
    ),
    format: formatDuration,
  };
}

/** Milliseconds as the largest whole unit: 30000 → `30s`, 1500 → `1500ms`. */
export function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

const SIZE_UNITS: Record<string, number> = { B: 1, KB: 1000, MB: 1000 ** 2, GB: 1000 ** 3, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 };

/** A size: `100B`, `50KB`, `512KiB`, `64MiB`, `1GB` in the environment; bytes in code. */
export function size(options: { min?: number } = {}): SettingType<number> {
  const min = options.min ?? 0;
  return {
    expected: `a size with its unit (B, KB, MB, GB, KiB, MiB, GiB), such as 512KiB, 64MiB${min > 0 ? `, at least ${formatSize(min)}` : ''}`,
    schema: textOr(
      z
        .number()
        .int()
        .min(min, `at least ${formatSize(min)}`),
      (raw) => {
        const match = /^(\d+(?:\.\d+)?)(B|KB|MB|GB|KiB|MiB|GiB)$/.exec(raw);
        if (!match) throw new Error('write the unit: 100B, 50KB, 64MiB');
        return Math.round(Number(match[1]) * SIZE_UNITS[match[2]!]!);
      },
    ),
    format: formatSize,
  };
}

/** Bytes as the largest whole unit: 67108864 → `64MiB`, 50000 → `50KB`, 1500 → `1500B`. */
export function formatSize(bytes: number): string {
  for (const [unit, n] of [
    ['GiB', 1024 ** 3],
    ['GB', 1000 ** 3],
    ['MiB', 1024 ** 2],
    ['MB', 1000 ** 2],
    ['KiB', 1024],
    ['KB', 1000],
  ] as const) {
    if (bytes >= n && bytes % n === 0) return `${bytes / n}${unit}`;
  }
  return `${bytes}B`;
}

/**
 * A 32-byte secret key (AES-256), as base64 or the absolute path of a file holding it: kept as
 * given, and checked when read (a malformed key stops the service at start-up). Shown masked.
 */
export function secretKey(): SettingType<string> {
  return {
    expected: '32 bytes as base64, or an absolute path of a file holding them',
    schema: z.string().superRefine((raw, ctx) => {
      try {
        parseSecretKey(raw, 'the key');
      } catch (err) {
        ctx.addIssue({ code: 'custom', message: (err as Error).message });
      }
    }),
    format: (value) => (value.trim().startsWith('/') ? value : '***'),
  };
}
