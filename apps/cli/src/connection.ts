/**
 * Where the CLI connects and as whom: BEDROCK_URL (default http://127.0.0.1:8080, web-bff's
 * HTTP/1.1 port, Connect protocol) and BEDROCK_TOKEN; with no token set, the local token of
 * the embedded default, `$BEDROCK_DATA_DIR/token` (default `~/.bedrock/token`). Every call
 * names its client in `bedrock-client` (`cli`, or `acp` for the editor agent), which the
 * audit log records.
 */
import { readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client, type Interceptor, type Transport } from '@connectrpc/connect';
import { createConnectTransport, createGrpcTransport } from '@connectrpc/connect-node';
import { CLIENT_HEADER, ConversationService, WorkspaceService } from '@bedrock/contracts';

export const DEFAULT_URL = 'http://127.0.0.1:8080';

export type ApiClient = Client<typeof ConversationService>;
export type WorkspacesClient = Client<typeof WorkspaceService>;

/** The data directory of the embedded default. */
export function dataDir(env: NodeJS.ProcessEnv): string {
  return env.BEDROCK_DATA_DIR || join(homedir(), '.bedrock');
}

/** BEDROCK_TOKEN, else the embedded default's local token file, else undefined. */
export function resolveToken(env: NodeJS.ProcessEnv): string | undefined {
  const fromEnv = env.BEDROCK_TOKEN?.trim();
  if (fromEnv) return fromEnv;
  try {
    return readFileSync(join(dataDir(env), 'token'), 'utf8').trim() || undefined;
  } catch {
    return undefined;
  }
}

/** The transport to web-bff with the caller's token, for any of its services; `client` names this client (bedrock-client). */
export function apiTransport(env: NodeJS.ProcessEnv, client = 'cli'): Transport {
  const baseUrl = (env.BEDROCK_URL || DEFAULT_URL).replace(/\/+$/, '');
  const token = resolveToken(env);
  const auth: Interceptor = (next) => (req) => {
    if (token) req.header.set('authorization', `Bearer ${token}`);
    req.header.set(CLIENT_HEADER, client);
    return next(req);
  };
  // BEDROCK_PROTOCOL=grpc talks gRPC over h2c (e.g. to BEDROCK_GRPC_PORT); default Connect over HTTP/1.1.
  return env.BEDROCK_PROTOCOL === 'grpc'
    ? createGrpcTransport({ baseUrl, interceptors: [auth] })
    : createConnectTransport({ baseUrl, httpVersion: '1.1', interceptors: [auth] });
}

export function connect(env: NodeJS.ProcessEnv, client = 'cli'): ApiClient {
  return createClient(ConversationService, apiTransport(env, client));
}

/** The ConversationService and WorkspaceService clients on one transport. */
export function connectBoth(env: NodeJS.ProcessEnv, client = 'cli'): { client: ApiClient; workspaces: WorkspacesClient } {
  const transport = apiTransport(env, client);
  return { client: createClient(ConversationService, transport), workspaces: createClient(WorkspaceService, transport) };
}
