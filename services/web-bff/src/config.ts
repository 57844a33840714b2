/**
 * Settings of web-bff: one schema, nested per concern, read from the environment and typed
 * overrides from code (the embedded mode's); docs/web-bff.md holds the table generated from it.
 * Durations are milliseconds in code and written with a unit in the environment (`15s`).
 */
import { fileURLToPath } from 'node:url';
import {
  duration,
  filePath,
  int,
  list,
  loadConfig,
  logLevelSetting,
  oneOf,
  optionalSetting,
  port,
  section,
  serverSection,
  serviceTokenFileSetting,
  setting,
  str,
  transportSection,
  url,
  z as zod,
  type ConfigOverrides,
  type SettingType,
} from '@bedrock/platform/config';

/** The web UI's build output inside this package, used when BEDROCK_UI_DIR is unset. */
export const DEFAULT_UI_DIR = fileURLToPath(new URL('../ui/dist', import.meta.url));

/** A duration of at most one second (the revocation bound). */
const atMostOneSecond: SettingType<number> = (() => {
  const base = duration();
  return { ...base, expected: `${base.expected}, at most 1s`, schema: base.schema.pipe(zod.number().max(1000, 'at most 1s')) };
})();

// web-bff serves no internal endpoint (its API authenticates users), so it has no service
// peers; it calls the conversation service, so it holds a service token (upstream.serviceTokenFile).
export const webBffConfigSchema = section({
  log: section({ level: logLevelSetting }),
  server: serverSection({
    httpPort: setting('BEDROCK_PORT', port(), {
      default: 8080,
      doc: 'HTTP/1.1 port for browsers and the CLI: Connect and gRPC-Web, plus the web UI files.',
    }),
    grpcPort: setting('BEDROCK_GRPC_PORT', port(), {
      default: 8081,
      doc: 'h2c (HTTP/2 without TLS) port for gRPC clients; also speaks Connect and gRPC-Web.',
    }),
  }),
  /** Where notification streams are read (`memory` only in one process with the conversation service). */
  transport: transportSection,
  auth: section({
    tokensFile: optionalSetting('BEDROCK_TOKENS_FILE', filePath(), {
      doc: 'File of `user_id:sha256hex` lines (hash of each bearer token); re-read on SIGHUP.',
    }),
    tokens: optionalSetting('BEDROCK_TOKENS', str('`user_id:sha256hex` entries, comma-separated'), {
      doc: 'Comma-separated `user_id:sha256hex` entries, in addition to BEDROCK_TOKENS_FILE.',
    }),
    admins: optionalSetting('BEDROCK_ADMIN_USERS', list(str('a user id')), {
      doc: 'User ids that have the admin role (AdminService) whatever the database says: the first admin of a deployment, e.g. a user of BEDROCK_TOKENS_FILE or of the identity provider.',
    }),
    /** ms. */
    cacheTtl: setting('BEDROCK_AUTH_CACHE_TTL', atMostOneSecond, {
      default: 1000,
      doc: 'How long an answer of the conversation service about a token or a user (valid, revoked, disabled, the role) is reused; at most 1s, so that a revoke or a disable holds on every replica within a second. 0ms: ask on every call.',
    }),
  }),
  /** OpenID Connect: ID or access tokens (JWT) of one issuer, besides bearer tokens. Off while `issuer` is unset. */
  oidc: section({
    issuer: optionalSetting('BEDROCK_OIDC_ISSUER', url({ protocols: ['https', 'http'] }), {
      doc: 'Issuer of the OpenID Connect tokens web-bff accepts (the `iss` claim, e.g. https://accounts.example.com); its JSON Web Keys are found through /.well-known/openid-configuration. Unset: OpenID Connect is off.',
    }),
    audience: optionalSetting('BEDROCK_OIDC_AUDIENCE', list(str('an audience')), {
      doc: 'Accepted `aud` values (the client id for ID tokens, the API identifier for access tokens), comma-separated; required with BEDROCK_OIDC_ISSUER.',
    }),
    jwksUrl: optionalSetting('BEDROCK_OIDC_JWKS_URL', url({ protocols: ['https', 'http'] }), {
      doc: "The issuer's JSON Web Key Set; unset: the `jwks_uri` of its discovery document.",
    }),
    userClaim: setting('BEDROCK_OIDC_USER_CLAIM', str('a claim name'), {
      default: 'sub',
      doc: 'The claim whose value is the Bedrock user id (letters, digits, `. _ @ -`): `sub` (stable, opaque), or `email` or `preferred_username` where the issuer vouches for them.',
    }),
    /** ms. */
    clockSkew: setting('BEDROCK_OIDC_CLOCK_SKEW', duration(), {
      default: 30_000,
      doc: 'Clock difference tolerated when checking `exp`, `nbf` and `iat`.',
    }),
    users: setting('BEDROCK_OIDC_USERS', oneOf(['auto', 'registered'] as const), {
      default: 'auto',
      doc: '`auto`: a signed-in identity unknown to Bedrock becomes a user with the role user on first sign-in; `registered`: only users an admin added (`bedrock admin users add`) may sign in.',
    }),
  }),
  upstream: section({
    conversationUrls: setting('BEDROCK_CONVERSATION_URL', list(url({ protocols: ['http', 'https'] }), { min: 1 }), {
      default: ['http://127.0.0.1:50051'],
      doc: "Base URLs of the conversation service's internal gRPC API (h2c for http://), comma-separated; calls are spread over every replica, and a host name is resolved to all of its addresses (a Kubernetes headless Service lists every ready pod).",
    }),
    /** ms; 0 = only after a replica fails. */
    resolveInterval: setting('BEDROCK_CONVERSATION_RESOLVE_INTERVAL', duration(), {
      default: 10_000,
      doc: 'How often host names in BEDROCK_CONVERSATION_URL are resolved again to follow replicas that come and go (also after a replica fails); 0ms = only then.',
    }),
    /** ms. */
    timeout: setting('BEDROCK_UPSTREAM_TIMEOUT', duration({ min: 1 }), {
      default: 30_000,
      doc: 'Deadline of each unary call to the conversation service.',
    }),
    serviceTokenFile: serviceTokenFileSetting,
  }),
  watch: section({
    /** ms. */
    heartbeat: setting('BEDROCK_WATCH_HEARTBEAT', duration({ min: 1 }), {
      default: 15_000,
      doc: 'A watch stream with no event for this long gets a heartbeat event.',
    }),
    /** ms. */
    maxLag: setting('BEDROCK_WATCH_MAX_LAG', duration({ min: 1 }), {
      default: 30_000,
      doc: 'A watcher that stays behind the live stream this long (it reads slower than events arrive) is cut off with RESOURCE_EXHAUSTED naming its resume position.',
    }),
    /** ms. */
    stallTimeout: setting('BEDROCK_WATCH_STALL_TIMEOUT', duration({ min: 1 }), {
      default: 60_000,
      doc: 'A watch stream whose client has not accepted a single write for this long is reset (the client resumes from the last event it saw).',
    }),
    /** Events. */
    bufferEvents: setting('BEDROCK_WATCH_BUFFER', int({ min: 16, max: 100_000 }), {
      default: 512,
      doc: 'Recent events kept in memory per watched conversation and shared by its watchers; watchers further behind read from the stream store.',
    }),
    delivery: setting('BEDROCK_WATCH_DELIVERY', oneOf(['push', 'pull'] as const), {
      default: 'push',
      doc: "How caught-up binary gRPC watchers get new events: `push`, written to their streams by the conversation's shared tail as it reads them (one chunk of frames built once for all, no step of the watcher's own loop); a watcher whose stream stops taking writes goes back to its loop and, once drained, gets a fresh snapshot if it fell more than a batch (500 events) or the buffer behind; `pull`, each watcher's loop is woken and writes them itself (as before 2026-11-27).",
    }),
    /** ms. */
    linger: setting('BEDROCK_WATCH_LINGER', duration(), {
      default: 10_000,
      doc: "How long a conversation's shared reader and buffer outlive its last watcher, so reconnecting clients resume from memory.",
    }),
    /** Streams. */
    maxPerUser: setting('BEDROCK_WATCH_MAX_PER_USER', int({ min: 0 }), {
      default: 64,
      doc: 'Watch streams one user may have open at once on one web-bff replica (each costs 16-50 KiB); one more is refused with RESOURCE_EXHAUSTED `limit_reached` (`max_watch_streams`); 0: no limit.',
    }),
  }),
  http: section({
    publicUrl: optionalSetting('BEDROCK_PUBLIC_URL', url(), {
      doc: 'The origin browsers reach this web-bff at (e.g. https://bedrock.example.com): MCP logins send the browser back to its /mcp/oauth/callback. Unset: the origin each request came to (right unless a proxy rewrites the host).',
    }),
    corsOrigins: setting('BEDROCK_CORS_ORIGINS', list(str('an origin')), {
      default: ['http://localhost:5173', 'http://127.0.0.1:5173'],
      doc: 'Comma-separated origins allowed to call the API from a browser (`*` for any); the UI served by web-bff itself needs none.',
    }),
    // Unset rather than a default: the default is a path on this machine (DEFAULT_UI_DIR).
    uiDir: optionalSetting('BEDROCK_UI_DIR', str('a directory'), {
      doc: 'Directory of the built web UI served on BEDROCK_PORT (index.html fallback for client routes); unset: the build inside the package (`services/web-bff/ui/dist`).',
    }),
  }),
});

export type WebBffConfig = zod.output<typeof webBffConfigSchema>;

/**
 * Reads web-bff's settings from `env`; `overrides` (typed values, durations in ms) win over it.
 * @throws ConfigError naming every bad variable.
 */
export function readWebBffConfig(
  env: Record<string, string | undefined> = process.env,
  overrides: ConfigOverrides<WebBffConfig> = {},
): WebBffConfig {
  return loadConfig(webBffConfigSchema, env, overrides);
}
