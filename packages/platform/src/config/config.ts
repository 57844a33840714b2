/**
 * The one way a service declares and reads its settings, on zod: a zod object nested per concern (`server`,
 * `database`, `redis`, …) whose leaves are {@link setting}s, each naming its environment variable, its type,
 * its default and one sentence for operators. From that one schema come the typed config ({@link loadConfig})
 * and the documentation tables ({@link configMarkdownTable}, checked against docs/ by tests). Conventions
 * (value formats, empty = unset, failing fast): docs/configuration.md, "Conventions".
 */
import { z } from 'zod';

/** A value type of a setting: how it is read from text and how it is shown in docs. */
export interface SettingType<T> {
  /** Accepts the text of an environment variable, or a value of type T given in code. */
  readonly schema: z.ZodType<T, unknown>;
  /** What a valid value looks like, for errors and docs, e.g. `a port 0..65535`. */
  readonly expected: string;
  /** Renders a value for docs; default `String(value)`. */
  readonly format?: (value: T) => string;
}

interface SettingInfo {
  readonly env: string;
  readonly doc: string;
  readonly expected: string;
  readonly required: boolean;
  readonly default: unknown;
  readonly format?: (value: never) => string;
}

/** Leaf schema → what docs and errors need to know about it. */
const settings = new WeakMap<z.ZodType, SettingInfo>();

interface SettingOptions<T> {
  /** One sentence for operators: what it does, with units. */
  readonly doc: string;
  /** Used when the variable is unset or empty; leave it out to make the setting required. */
  readonly default?: NoInfer<T>;
}

/** A setting read from the variable `env`, with a default (or required when none is given). */
export function setting<T>(env: string, type: SettingType<T>, options: SettingOptions<T> & { default: NoInfer<T> }): z.ZodType<T, unknown>;
export function setting<T>(env: string, type: SettingType<T>, options: SettingOptions<T>): z.ZodType<T, unknown>;
export function setting<T>(env: string, type: SettingType<T>, options: SettingOptions<T>): z.ZodType<T, unknown> {
  const required = !('default' in options);
  const schema = (required ? type.schema : type.schema.default(options.default as never)) as z.ZodType<T, unknown>;
  settings.set(schema, {
    env,
    doc: options.doc,
    expected: type.expected,
    required,
    default: options.default,
    format: type.format as never,
  });
  return schema;
}

/** A setting that may be absent (`undefined` when its variable is unset). */
export function optionalSetting<T>(env: string, type: SettingType<T>, options: { doc: string }): z.ZodType<T | undefined, unknown> {
  const schema = type.schema.optional() as z.ZodType<T | undefined, unknown>;
  settings.set(schema, {
    env,
    doc: options.doc,
    expected: type.expected,
    required: false,
    default: undefined,
    format: type.format as never,
  });
  return schema;
}

/** A group of settings (or of groups): a concern of the config, e.g. `server` or `database`. */
export function section<S extends z.ZodRawShape>(shape: S) {
  return z.object(shape).strict();
}

/** One setting found in a schema, with its place in the config object. */
interface Leaf extends SettingInfo {
  readonly path: readonly string[];
}

function leaves(schema: z.ZodType, path: readonly string[] = []): Leaf[] {
  const info = settings.get(schema);
  if (info) return [{ ...info, path }];
  if (schema instanceof z.ZodObject)
    return Object.entries(schema.shape as Record<string, z.ZodType>).flatMap(([k, s]) => leaves(s, [...path, k]));
  throw new Error(`config schema at ${path.join('.') || '(root)'}: neither a section nor a setting`);
}

/** Recursively optional: what code may override. */
export type ConfigOverrides<T> = {
  [K in keyof T]?: T[K] extends readonly unknown[] ? T[K] : T[K] extends object ? ConfigOverrides<T[K]> : T[K];
};

/** Thrown by {@link loadConfig}; `problems` has one line per bad setting. */
export class ConfigError extends Error {
  constructor(readonly problems: readonly string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
    this.name = 'ConfigError';
  }
}

function setAt(target: Record<string, unknown>, path: readonly string[], value: unknown): void {
  let node = target;
  for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
  node[path[path.length - 1]!] = value;
}

function getAt(source: unknown, path: readonly string[]): unknown {
  let node = source;
  for (const key of path) {
    if (node === null || typeof node !== 'object') return undefined;
    node = (node as Record<string, unknown>)[key];
  }
  return node;
}

/**
 * Reads `schema`'s settings from `env`, then applies `overrides` (typed values from code, e.g. the
 * embedded mode's), and validates the result. An empty variable counts as unset, because manifests and
 * `.env` files often write `NAME=` to mean "not set".
 * @throws ConfigError listing every missing or invalid setting at once.
 */
export function loadConfig<S extends z.ZodType>(
  schema: S,
  env: Record<string, string | undefined> = process.env,
  overrides: ConfigOverrides<z.output<S>> = {},
): z.output<S> {
  const all = leaves(schema);
  const input: Record<string, unknown> = {};
  const fromEnv = new Map<string, string>();
  for (const leaf of all) {
    // Every section exists in the input, so that its settings' defaults apply.
    for (let i = 1; i < leaf.path.length; i++)
      if (getAt(input, leaf.path.slice(0, i)) === undefined) setAt(input, leaf.path.slice(0, i), {});
    const override = getAt(overrides, leaf.path);
    if (override !== undefined) {
      setAt(input, leaf.path, override);
      continue;
    }
    const raw = env[leaf.env]?.trim();
    if (raw === undefined || raw === '') continue;
    fromEnv.set(leaf.path.join('.'), raw);
    setAt(input, leaf.path, raw);
  }
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const problems = new Set<string>();
  for (const issue of result.error.issues) {
    const key = issue.path.map(String).join('.');
    const leaf = all.find((l) => key === l.path.join('.') || key.startsWith(`${l.path.join('.')}.`));
    if (!leaf) {
      problems.add(`${key || '(config)'}: ${issue.message}`);
      continue;
    }
    const raw = fromEnv.get(leaf.path.join('.'));
    const reason = issue.code === 'custom' || issue.code === 'too_small' || issue.code === 'too_big' ? ` (${issue.message})` : '';
    if (raw !== undefined) problems.add(`${leaf.env}=${JSON.stringify(raw)} is invalid: expected ${leaf.expected}${reason}`);
    else if (getAt(input, leaf.path) === undefined) problems.add(`${leaf.env} is required: expected ${leaf.expected} (${leaf.doc})`);
    else problems.add(`${leaf.path.join('.')} (${leaf.env}) is invalid: expected ${leaf.expected}${reason}`);
  }
  throw new ConfigError([...problems]);
}

/** One documentation row of a setting. */
export interface ConfigRow {
  readonly env: string;
  /** Where it lands in the config object, e.g. `server.grpcPort`. */
  readonly path: string;
  /** The default as written in the environment; `undefined` when required or absent. */
  readonly default: string | undefined;
  readonly required: boolean;
  readonly expected: string;
  readonly doc: string;
}

/** Documentation rows, in schema order. */
export function describeConfig(schema: z.ZodType): ConfigRow[] {
  return leaves(schema).map((leaf) => {
    const value = leaf.default;
    const shown = value === undefined ? undefined : leaf.format ? (leaf.format as (v: unknown) => string)(value) : String(value);
    return { env: leaf.env, path: leaf.path.join('.'), default: shown, required: leaf.required, expected: leaf.expected, doc: leaf.doc };
  });
}

/** The rows as a Markdown table (`| variable | default | expected | meaning |`). */
export function configMarkdownTable(schema: z.ZodType): string {
  const cell = (text: string): string => text.replaceAll('|', '\\|');
  const lines = ['| variable | default | expected | meaning |', '| --- | --- | --- | --- |'];
  for (const row of describeConfig(schema)) {
    const def = row.required ? '(required)' : row.default === undefined ? '(unset)' : `\`${row.default}\``;
    lines.push(`| \`${row.env}\` | ${cell(def)} | ${cell(row.expected)} | ${cell(row.doc)} |`);
  }
  return lines.join('\n');
}
