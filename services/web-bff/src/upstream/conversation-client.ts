/**
 * The conversation service's internal API, called on behalf of an authenticated user: every
 * call carries web-bff's service credential (`authorization: Bearer <service token>`) and,
 * with it, `bedrock-user-id`, which that service believes only from web-bff. One HTTP/2
 * connection is shared by all calls of this process.
 */
import { createClient, type CallOptions, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';
import { serviceCredentialHeaders, USER_HEADER } from '@bedrock/platform/server';

export type ConversationClient = Client<typeof ConversationService>;

export interface UpstreamOptions {
  /** e.g. http://127.0.0.1:50051 (h2c). */
  readonly baseUrl: string;
  /** Deadline of each unary call, ms. */
  readonly timeoutMs: number;
  /** web-bff's own service token; without one, calls carry no credential and no user (and are refused). */
  readonly serviceToken: string | undefined;
}

export interface Upstream {
  readonly client: ConversationClient;
  /** Options for one unary call acting as `user`, cancelled with `signal` (the client's). */
  options(user: string, signal?: AbortSignal): CallOptions;
}

export function createUpstream(options: UpstreamOptions): Upstream {
  const transport = createGrpcTransport({
    baseUrl: options.baseUrl,
    // Pings notice a dead conversation service on an idle connection.
    pingIntervalMs: 30_000,
    pingIdleConnection: true,
    // Histories with images can be large; the conversation service bounds what it accepts.
    readMaxBytes: 256 * 1024 * 1024,
    writeMaxBytes: 64 * 1024 * 1024,
  });
  const { serviceToken } = options;
  return {
    client: createClient(ConversationService, transport),
    options(user, signal) {
      // The user id travels only alongside the service credential, never on its own.
      const headers = serviceToken ? { ...serviceCredentialHeaders(serviceToken), [USER_HEADER]: user } : {};
      return { headers, timeoutMs: options.timeoutMs, ...(signal ? { signal } : {}) };
    },
  };
}
