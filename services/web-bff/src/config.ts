/** Settings of web-bff, from the environment (docs/web-bff.md lists them). */
import { fileURLToPath } from 'node:url';
import { commonEnv, duration, int, oneOf, optional, port, readEnv, setting, str, urlList } from '@bedrock/platform/server';

/** The web UI's build output inside this package, used when BEDROCK_UI_DIR is unset. */
export const DEFAULT_UI_DIR = fileURLToPath(new URL('../ui/dist', import.meta.url));

// web-bff serves no internal endpoint (its API authenticates users), so it has no service
// peers; it calls the conversation service, so it holds a service token (BEDROCK_SERVICE_TOKEN_FILE).
const { servicePeersFile: _servesNoInternalEndpoint, ...common } = commonEnv;

export const webBffEnv = {
  ...common,
  httpPort: setting({
    name: 'BEDROCK_PORT',
    parse: port(),
    default: 8080,
    doc: 'HTTP/1.1 port for browsers and the CLI: Connect and gRPC-Web, plus the web UI files.',
  }),
  grpcPort: setting({
    name: 'BEDROCK_GRPC_PORT',
    parse: port(),
    default: 8081,
    doc: 'h2c (HTTP/2 without TLS) port for gRPC clients; also speaks Connect and gRPC-Web.',
  }),
  conversationUrls: setting({
    name: 'BEDROCK_CONVERSATION_URL',
    parse: urlList({ protocols: ['http', 'https'] }),
    default: [new URL('http://127.0.0.1:50051')],
    doc: "Base URLs of the conversation service's internal gRPC API (h2c for http://), comma-separated; calls are spread over every replica, and a host name is resolved to all of its addresses (a Kubernetes headless Service lists every ready pod).",
  }),
  conversationResolveMs: setting({
    name: 'BEDROCK_CONVERSATION_RESOLVE_INTERVAL',
    parse: duration(),
    default: 10_000,
    doc: 'How often host names in BEDROCK_CONVERSATION_URL are resolved again to follow replicas that come and go (also after a replica fails); 0 = only then.',
  }),
  transport: setting({
    name: 'BEDROCK_TRANSPORT',
    parse: oneOf(['redis', 'memory'] as const),
    default: 'redis',
    doc: 'Where notification streams are read: `redis` (REDIS_URL, BEDROCK_REDIS_PREFIX) or `memory` (only in one process with the conversation service).',
  }),
  tokensFile: setting({
    name: 'BEDROCK_TOKENS_FILE',
    parse: optional(str()),
    default: undefined,
    doc: 'File of `user_id:sha256hex` lines (hash of each bearer token); re-read on SIGHUP.',
  }),
  tokens: setting({
    name: 'BEDROCK_TOKENS',
    parse: optional(str()),
    default: undefined,
    doc: 'Comma-separated `user_id:sha256hex` entries, in addition to BEDROCK_TOKENS_FILE.',
  }),
  corsOrigins: setting({
    name: 'BEDROCK_CORS_ORIGINS',
    parse: str(),
    default: 'http://localhost:5173,http://127.0.0.1:5173',
    doc: 'Comma-separated origins allowed to call the API from a browser (`*` for any); the UI served by web-bff itself needs none.',
  }),
  uiDir: setting({
    name: 'BEDROCK_UI_DIR',
    parse: str(),
    default: DEFAULT_UI_DIR,
    doc: 'Directory of the built web UI served on BEDROCK_PORT (index.html fallback for client routes).',
  }),
  heartbeatMs: setting({
    name: 'BEDROCK_WATCH_HEARTBEAT',
    parse: duration(),
    default: 15_000,
    doc: 'A watch stream with no event for this long gets a heartbeat event.',
  }),
  watchMaxLagMs: setting({
    name: 'BEDROCK_WATCH_MAX_LAG',
    parse: duration(),
    default: 30_000,
    doc: 'A watcher that stays behind the live stream this long (it reads slower than events arrive) is cut off with RESOURCE_EXHAUSTED naming its resume position.',
  }),
  watchStallMs: setting({
    name: 'BEDROCK_WATCH_STALL_TIMEOUT',
    parse: duration(),
    default: 60_000,
    doc: 'A watch stream whose client has not accepted a single write for this long is reset (the client resumes from the last event it saw).',
  }),
  watchBufferEvents: setting({
    name: 'BEDROCK_WATCH_BUFFER',
    parse: int({ min: 16, max: 100_000 }),
    default: 512,
    doc: 'Recent events kept in memory per watched conversation and shared by its watchers; watchers further behind read from the stream store.',
  }),
  watchLingerMs: setting({
    name: 'BEDROCK_WATCH_LINGER',
    parse: duration(),
    default: 10_000,
    doc: "How long a conversation's shared reader and buffer outlive its last watcher, so reconnecting clients resume from memory.",
  }),
  upstreamTimeoutMs: setting({
    name: 'BEDROCK_UPSTREAM_TIMEOUT',
    parse: duration(),
    default: 30_000,
    doc: 'Deadline of each unary call to the conversation service.',
  }),
};

export type WebBffConfig = ReturnType<typeof readWebBffConfig>;

export function readWebBffConfig(env: Record<string, string | undefined> = process.env) {
  return readEnv(webBffEnv, env);
}
