/**
 * A tiny typed reader for environment variables. Each service's `config.ts` declares a spec
 * (name, parser, default, doc) and calls {@link readEnv} once at startup; a bad environment
 * fails fast with one error naming every bad variable, and {@link describeEnv} turns the
 * same spec into documentation rows so docs/configuration.md can be checked against code.
 */

/** Turns a raw (non-empty, trimmed) string into a value, or throws with a short reason. */
export interface EnvParser<T> {
  /** What a valid value looks like, for error messages and docs, e.g. `integer 0..65535`. */
  readonly expected: string;
  parse(raw: string): T;
  /** Renders a default for docs; default `String(value)`. */
  format?(value: T): string;
}

/** One environment variable. */
export interface EnvSetting<T> {
  /** The variable name, e.g. `BEDROCK_GRPC_PORT`. */
  name: string;
  parse: EnvParser<T>;
  /**
   * Used when the variable is unset or empty. Leave the key out to make the variable
   * required; use `optional(...)` with `default: undefined` for "may be absent".
   */
  default?: NoInfer<T>;
  /** One sentence for operators: what it does, with units. */
  doc: string;
}

/** A spec: config field name → setting. */
export type EnvSpec = Record<string, EnvSetting<unknown>>;

/** The config object a spec produces. */
export type EnvValues<S extends EnvSpec> = { [K in keyof S]: S[K] extends EnvSetting<infer T> ? T : never };

/** Helps inference: `setting({ name, parse: int(), default: 8080, doc })` is an `EnvSetting<number>`. */
export function setting<T>(s: EnvSetting<T>): EnvSetting<T> {
  return s;
}

/** Thrown by {@link readEnv}; `problems` has one line per bad variable. */
export class EnvError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid environment:\n  ${problems.join('\n  ')}`);
    this.name = 'EnvError';
  }
}

/**
 * Reads and validates every setting of `spec` from `env`. An empty value counts as unset,
 * because Kubernetes manifests and `.env` files often write `NAME=` to mean "not set".
 * @throws EnvError listing every missing or invalid variable at once.
 */
export function readEnv<S extends EnvSpec>(spec: S, env: Record<string, string | undefined> = process.env): EnvValues<S> {
  const values: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [key, s] of Object.entries(spec)) {
    const raw = env[s.name]?.trim();
    if (raw === undefined || raw === '') {
      if ('default' in s) values[key] = s.default;
      else problems.push(`${s.name} is required: expected ${s.parse.expected} (${s.doc})`);
      continue;
    }
    try {
      values[key] = s.parse.parse(raw);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      problems.push(`${s.name}=${JSON.stringify(raw)} is invalid: expected ${s.parse.expected}${reason ? ` (${reason})` : ''}`);
    }
  }
  if (problems.length > 0) throw new EnvError(problems);
  return values as EnvValues<S>;
}

/** One documentation row of a setting. */
export interface EnvRow {
  name: string;
  /** The default as written in the environment, or `undefined` when required or absent. */
  default: string | undefined;
  required: boolean;
  expected: string;
  doc: string;
}

/** Documentation rows, in spec order. */
export function describeEnv(spec: EnvSpec): EnvRow[] {
  return Object.values(spec).map((s) => {
    const required = !('default' in s);
    const value = s.default;
    const shown = value === undefined ? undefined : s.parse.format ? s.parse.format(value) : String(value);
    return { name: s.name, default: shown, required, expected: s.parse.expected, doc: s.doc };
  });
}

/** The rows as a Markdown table (`| variable | default | expected | meaning |`). */
export function envMarkdownTable(spec: EnvSpec): string {
  const cell = (text: string): string => text.replaceAll('|', '\\|');
  const lines = ['| variable | default | expected | meaning |', '| --- | --- | --- | --- |'];
  for (const row of describeEnv(spec)) {
    const def = row.required ? '(required)' : row.default === undefined ? '(unset)' : `\`${row.default}\``;
    lines.push(`| \`${row.name}\` | ${cell(def)} | ${cell(row.expected)} | ${cell(row.doc)} |`);
  }
  return lines.join('\n');
}

// ---- parsers ----

/** Any non-empty string. */
export function str(): EnvParser<string> {
  return { expected: 'a string', parse: (raw) => raw };
}

/** A base-10 integer within [min, max] (defaults: safe-integer range). */
export function int(options: { min?: number; max?: number } = {}): EnvParser<number> {
  const min = options.min ?? Number.MIN_SAFE_INTEGER;
  const max = options.max ?? Number.MAX_SAFE_INTEGER;
  const range = options.min !== undefined || options.max !== undefined ? ` ${options.min ?? '..'}..${options.max ?? ''}` : '';
  return {
    expected: `an integer${range}`,
    parse(raw) {
      if (!/^[+-]?\d+$/.test(raw)) throw new Error('not an integer');
      const n = Number(raw);
      if (n < min || n > max) throw new Error('out of range');
      return n;
    },
  };
}

/** A TCP port, 0..65535 (0 = pick a free one). */
export function port(): EnvParser<number> {
  return { ...int({ min: 0, max: 65535 }), expected: 'a port 0..65535' };
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

/** true/false, 1/0, yes/no, on/off (any case). */
export function bool(): EnvParser<boolean> {
  return {
    expected: 'true or false',
    parse(raw) {
      const v = raw.toLowerCase();
      if (TRUE.has(v)) return true;
      if (FALSE.has(v)) return false;
      throw new Error('');
    },
  };
}

/** An absolute URL, optionally restricted to some schemes (given without the colon). */
export function url(options: { protocols?: string[] } = {}): EnvParser<URL> {
  const protocols = options.protocols;
  return {
    expected: protocols ? `a ${protocols.join('/')} URL` : 'an absolute URL',
    parse(raw) {
      let parsed: URL;
      try {
        parsed = new URL(raw);
      } catch {
        throw new Error('not a URL');
      }
      if (protocols && !protocols.includes(parsed.protocol.slice(0, -1))) throw new Error(`scheme ${parsed.protocol} not allowed`);
      return parsed;
    },
    // Credentials in a default would end up in generated docs; show them masked.
    format: (value) => (value.password ? Object.assign(new URL(value), { password: '***' }).href : value.href),
  };
}

/** One or more absolute URLs, comma-separated (blanks around commas ignored). */
export function urlList(options: { protocols?: string[] } = {}): EnvParser<URL[]> {
  const one = url(options);
  return {
    expected: `${one.expected.replace(/^an? /, 'one or more ')}s, comma-separated`,
    parse(raw) {
      const parts = raw
        .split(',')
        .map((p) => p.trim())
        .filter((p) => p !== '');
      if (parts.length === 0) throw new Error('no URL');
      return parts.map((p) => {
        try {
          return one.parse(p);
        } catch (err) {
          throw new Error(`${p}: ${(err as Error).message}`);
        }
      });
    },
    format: (values) => values.map((v) => one.format!(v)).join(','),
  };
}

/** One of a fixed set of strings (case-sensitive). */
export function oneOf<const T extends string>(values: readonly T[]): EnvParser<T> {
  return {
    expected: `one of ${values.join(', ')}`,
    parse(raw) {
      if ((values as readonly string[]).includes(raw)) return raw as T;
      throw new Error('');
    },
  };
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** A duration in milliseconds: `1500` (ms), `1500ms`, `30s`, `1.5s`, `5m`, `1h`. Must be ≥ 0. */
export function duration(): EnvParser<number> {
  return {
    expected: 'a duration such as 500ms, 30s, 5m, 1h (a bare number is milliseconds)',
    parse(raw) {
      const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(raw);
      if (!match) throw new Error('');
      const ms = Number(match[1]) * (UNIT_MS[match[2] ?? 'ms'] as number);
      return Math.round(ms);
    },
    format: formatDuration,
  };
}

function formatDuration(ms: number): string {
  for (const [unit, size] of [
    ['h', 3_600_000],
    ['m', 60_000],
    ['s', 1000],
  ] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size}${unit}`;
  }
  return `${ms}ms`;
}

/** Makes a parser's type admit `undefined`, for settings with `default: undefined`. */
export function optional<T>(parser: EnvParser<T>): EnvParser<T | undefined> {
  return {
    expected: parser.expected,
    parse: (raw) => parser.parse(raw),
    format: (value) => (value === undefined ? '' : parser.format ? parser.format(value) : String(value)),
  };
}
