/**
 * Service identity on internal endpoints (docs/security.md, "Boundaries"): each service process holds its
 * own secret token (BEDROCK_SERVICE_TOKEN_FILE) and presents it as `authorization: Bearer <token>`; an
 * internal server answers only callers whose token hashes to an entry of its peers (BEDROCK_SERVICE_PEERS_FILE,
 * `service:sha256hex` lines). The authenticated peer's name reaches handlers through {@link servicePeer}.
 */
import { readFileSync } from 'node:fs';
import { Code, ConnectError, createContextKey, type HandlerContext, type Interceptor } from '@connectrpc/connect';
import type { Logger } from './logger.ts';
import {
  bearerToken,
  createTokenStore,
  generateToken,
  hashToken,
  parseTokenEntries,
  tokenEntriesOf,
  type TokenEntry,
} from './token-entries.ts';

/**
 * The only peer whose user header (`USER_HEADER` of @bedrock/contracts, `bedrock-user-id`) is believed: web-bff
 * authenticates users, so a user identity counts only alongside web-bff's credential.
 */
export const USER_IDENTITY_PEER = 'web-bff';

/** What a refused caller is told (never which part was wrong beyond "missing"/"not accepted"). */
export const INTERNAL_ENDPOINT_HINT =
  'this is an internal endpoint: present a service token (BEDROCK_SERVICE_TOKEN_FILE) listed in BEDROCK_SERVICE_PEERS_FILE as "authorization: Bearer <token>"';

/** Services answered without a credential: probes and `buf curl --list-methods` must work. */
const OPEN_SERVICES = new Set(['grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection']);

const peerKey = createContextKey<string | undefined>(undefined, { description: 'authenticated internal peer (service name)' });

/** The service that made this call, as authenticated by {@link serviceAuthInterceptor}; undefined if none. */
export function servicePeer(ctx: HandlerContext): string | undefined {
  return ctx.values.get(peerKey);
}

export interface ServiceAuthOptions {
  /** Accepted callers; empty refuses every call but health and reflection (fail closed). */
  readonly peers: readonly TokenEntry[];
  readonly logger: Logger;
  /** Minimum interval between two "call refused" log lines, ms (the rest are counted). Default 10 s. */
  readonly refusalLogIntervalMs?: number;
}

/**
 * The server side: every call except health checking and reflection must carry
 * `authorization: Bearer <token>` whose SHA-256 matches a peer (constant-time comparison with
 * every entry), else UNAUTHENTICATED. Logs once at creation what it accepts.
 */
export function serviceAuthInterceptor(options: ServiceAuthOptions): Interceptor {
  const { logger } = options;
  const peers = createTokenStore(options.peers);
  if (peers.names.length === 0) {
    logger.warn(
      'no service peers configured (BEDROCK_SERVICE_PEERS_FILE): every internal call except health checking and reflection will be refused',
    );
  } else {
    logger.info({ peers: peers.names }, 'internal calls accepted from these services');
  }
  const interval = options.refusalLogIntervalMs ?? 10_000;
  let lastLogged = -Infinity;
  let suppressed = 0;
  const refuse = (method: string, reason: string): never => {
    const now = Date.now();
    if (now - lastLogged >= interval) {
      logger.warn({ method, reason, suppressed }, 'internal call refused: no valid service token');
      lastLogged = now;
      suppressed = 0;
    } else {
      suppressed++;
    }
    throw new ConnectError(`${reason}: ${INTERNAL_ENDPOINT_HINT}`, Code.Unauthenticated);
  };
  return (next) => async (req) => {
    if (OPEN_SERVICES.has(req.service.typeName)) return next(req);
    const method = `${req.service.typeName}/${req.method.name}`;
    const token = bearerToken(req.header.get('authorization'));
    if (!token) return refuse(method, 'missing service credential');
    const peer = peers.authenticate(token);
    if (!peer) return refuse(method, 'service token not accepted');
    req.contextValues.set(peerKey, peer);
    return next(req);
  };
}

/** The client side: sends `token` on every call of a transport (`createGrpcTransport({ interceptors: [...] })`). */
export function serviceTokenInterceptor(token: string): Interceptor {
  const value = `Bearer ${token}`;
  return (next) => (req) => {
    req.header.set('authorization', value);
    return next(req);
  };
}

/** `{ authorization: 'Bearer <token>' }`, for per-call headers. */
export function serviceCredentialHeaders(token: string): Record<string, string> {
  return { authorization: `Bearer ${token}` };
}

function readSecretFile(setting: string, path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new Error(`${setting}=${path}: cannot read the file (${code})`);
  }
}

/** A service token as written in a token file: one line, trimmed, no spaces. */
export function parseServiceToken(text: string, source: string): string {
  const token = text.trim();
  if (!token) throw new Error(`${source} is empty: expected the service token on one line`);
  if (/\s/.test(token)) throw new Error(`${source}: expected the service token on one line without spaces`);
  return token;
}

/** Reads BEDROCK_SERVICE_TOKEN_FILE; throws a message naming the setting and path (never the content). */
export function readServiceTokenFile(path: string): string {
  return parseServiceToken(readSecretFile('BEDROCK_SERVICE_TOKEN_FILE', path), `BEDROCK_SERVICE_TOKEN_FILE=${path}`);
}

/** Reads BEDROCK_SERVICE_PEERS_FILE (`service:sha256hex` lines, blank lines and # comments allowed). */
export function readServicePeersFile(path: string): TokenEntry[] {
  return parseTokenEntries(readSecretFile('BEDROCK_SERVICE_PEERS_FILE', path), `BEDROCK_SERVICE_PEERS_FILE=${path}`, 'service');
}

/** Fresh credentials for a set of services, as a composition (embedded, local cluster) hands them out. */
export interface ServiceCredentials {
  /** Plaintext token by service name. */
  readonly tokens: Readonly<Record<string, string>>;
  /** Every service as a peer. */
  readonly peers: readonly TokenEntry[];
  /** The same peers as the text of a peers file. */
  readonly peersFile: string;
}

export function generateServiceCredentials(services: readonly string[]): ServiceCredentials {
  const tokens = Object.fromEntries(services.map((name) => [name, generateToken()]));
  const peersFile = `# service:sha256hex (hash of each service's token)\n${services.map((name) => `${name}:${hashToken(tokens[name] as string)}\n`).join('')}`;
  return { tokens, peers: tokenEntriesOf(tokens), peersFile };
}
