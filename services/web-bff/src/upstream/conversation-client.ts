/**
 * The conversation service's internal API, called on behalf of an authenticated user: every
 * call carries `bedrock-user-id`, which that service trusts to enforce ownership. One HTTP/2
 * connection is shared by all calls of this process.
 */
import { createClient, type CallOptions, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationService } from '@bedrock/contracts';

/** The header the conversation service reads the caller from (its exported `USER_HEADER`). */
export const USER_HEADER = 'bedrock-user-id';

export type ConversationClient = Client<typeof ConversationService>;

export interface UpstreamOptions {
  /** e.g. http://127.0.0.1:50051 (h2c). */
  readonly baseUrl: string;
  /** Deadline of each unary call, ms. */
  readonly timeoutMs: number;
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
  return {
    client: createClient(ConversationService, transport),
    options(user, signal) {
      return { headers: { [USER_HEADER]: user }, timeoutMs: options.timeoutMs, ...(signal ? { signal } : {}) };
    },
  };
}
