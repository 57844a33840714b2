/**
 * The environment commands run with: the runner's own, minus its secrets and settings.
 * A command (and so the model) must not read the Redis URL, database URLs or API keys the
 * runner was started with.
 */
const SECRET = /(^BEDROCK_|^REDIS_|^DATABASE_|^PG(PASSWORD|USER|HOST|DATABASE|PORT)$|_API_KEY$|_TOKEN$|_SECRET$|PASSWORD|^ANTHROPIC_)/i;

/** Computed once per base (a runner's settings hold a snapshot of its environment, taken at start). */
const computed = new WeakMap<NodeJS.ProcessEnv, Readonly<NodeJS.ProcessEnv>>();

/**
 * The commands' environment for `base`, frozen and computed once per base object: filtering the
 * whole environment cost ~0.15 ms per call, twice per tool (the run and its waiting helper), and
 * one object lets a waiting helper's environment be matched by identity. `process.env` itself,
 * which may change, is filtered anew each time.
 */
export function commandEnv(base: NodeJS.ProcessEnv): Readonly<NodeJS.ProcessEnv> {
  if (base === process.env) return filtered(base);
  let env = computed.get(base);
  if (!env) {
    env = filtered(base);
    computed.set(base, env);
  }
  return env;
}

function filtered(base: NodeJS.ProcessEnv): Readonly<NodeJS.ProcessEnv> {
  const env: NodeJS.ProcessEnv = {};
  for (const [name, value] of Object.entries(base)) {
    if (value !== undefined && !SECRET.test(name)) env[name] = value;
  }
  // Nothing can answer a prompt: stdin is /dev/null.
  env.GIT_TERMINAL_PROMPT = '0';
  // Tools run as their own user, so the workspace's .git is usually owned by someone else:
  // git would refuse it as "dubious ownership". Every process that sees this setting is a
  // sandboxed tool of the same user, which is the case safe.directory exists to protect.
  env.GIT_CONFIG_COUNT = '1';
  env.GIT_CONFIG_KEY_0 = 'safe.directory';
  env.GIT_CONFIG_VALUE_0 = '*';
  return Object.freeze(env);
}
