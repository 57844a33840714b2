/**
 * The conversation service's internal API, called on behalf of an authenticated user: every call
 * carries web-bff's service credential (`authorization: Bearer <service token>`) and, with it,
 * `bedrock-user-id`, which that service believes only from web-bff. Calls are spread over every
 * conversation replica: docs/web-bff.md, "Balancing over the conversation replicas".
 */
import type { DescMethod } from '@bufbuild/protobuf';
import { createClient, type CallOptions, type Client } from '@connectrpc/connect';
import {
  AdminService,
  CheckpointService,
  ConversationService,
  IdentityService,
  McpService,
  ROLE_HEADER,
  USER_HEADER,
  WorkspaceService,
} from '@bedrock/contracts';
import {
  createBalancedTransport,
  serviceCredentialHeaders,
  type BalancedTransport,
  type EndpointState,
  type Logger,
} from '@bedrock/platform/server';
import { declaredRepeatable, givingRequestIds } from './request-ids.ts';

export type ConversationClient = Client<typeof ConversationService>;

export interface UpstreamOptions {
  /** e.g. http://127.0.0.1:50051 (h2c); several for several replicas; a host name stands for all of its addresses. */
  readonly targets: readonly (string | URL)[];
  /** Deadline of each unary call, ms. */
  readonly timeoutMs: number;
  /** web-bff's own service token; without one, calls carry no credential and no user (and are refused). */
  readonly serviceToken: string | undefined;
  /** How often host names are resolved again, ms (0: only after failures). Default 10 s. */
  readonly resolveIntervalMs?: number;
  readonly logger?: Logger;
  /** Resolves a host name (tests). */
  readonly lookup?: (hostname: string) => Promise<string[]>;
}

export interface Upstream {
  readonly client: ConversationClient;
  /** AdminService, forwarded for admins (options with their role). */
  readonly admin: Client<typeof AdminService>;
  /** WorkspaceService, forwarded as the user. */
  readonly workspaces: Client<typeof WorkspaceService>;
  /** McpService, forwarded as the user. */
  readonly mcp: Client<typeof McpService>;
  /** CheckpointService, forwarded as the user. */
  readonly checkpoints: Client<typeof CheckpointService>;
  /** IdentityService: who a token or a user is (options without a user: `serviceOptions()`). */
  readonly identity: Client<typeof IdentityService>;
  /** Options for a call as web-bff itself (its service credential, no user). */
  serviceOptions(): CallOptions;
  /** The balanced transport under `client` (readiness checks the replicas' health over it). */
  readonly transport: BalancedTransport;
  /** Options for one unary call acting as `user` (with `role` when given), cancelled with `signal` (the client's). */
  options(user: string, signal?: AbortSignal, role?: string): CallOptions;
  /** The conversation replicas known now. */
  replicas(): EndpointState[];
  close(): void;
}

/**
 * Safe to send again to another replica after a connection broke mid-call: what the proto
 * declares (`option idempotency_level`: NO_SIDE_EFFECTS for reads, IDEMPOTENT for changes that set
 * absolute values), and a request carrying a `request_id`, which the conversation service answers
 * with the first outcome, applying nothing twice. The proto is the one place this is said.
 */
export function retrySafe(method: DescMethod, input: unknown): boolean {
  const requestId = typeof input === 'object' && input !== null ? (input as { requestId?: unknown }).requestId : undefined;
  return declaredRepeatable(method) || (typeof requestId === 'string' && requestId !== '');
}

/**
 * The clients, over one balanced transport (`createBalancedTransport`): one HTTP/2 connection per
 * conversation replica, round robin, for the URLs of `targets` (BEDROCK_CONVERSATION_URL), each
 * host name resolved to all of its addresses and re-resolved periodically. A replica that fails
 * is skipped at once; a call that never reached it is sent to another replica, and so is one
 * whose connection broke after it was sent when {@link retrySafe} says it may be (a change
 * without a request_id is given one first: request-ids.ts).
 */
export function createUpstream(options: UpstreamOptions): Upstream {
  const transport: BalancedTransport = createBalancedTransport({
    name: 'conversation',
    targets: options.targets,
    transport: {
      // Histories with images can be large; the conversation service bounds what it accepts.
      readMaxBytes: 256 * 1024 * 1024,
      writeMaxBytes: 64 * 1024 * 1024,
    },
    // Pings notice a dead replica on an idle connection.
    session: { pingIntervalMs: 30_000, pingIdleConnection: true },
    retrySafe,
    ...(options.resolveIntervalMs !== undefined ? { resolveIntervalMs: options.resolveIntervalMs } : {}),
    ...(options.lookup ? { lookup: options.lookup } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const { serviceToken } = options;
  // A change without a request_id gets web-bff's own, so that retrySafe lets it go to another replica (request-ids.ts).
  const calls = givingRequestIds(transport);
  return {
    client: createClient(ConversationService, calls),
    admin: createClient(AdminService, calls),
    workspaces: createClient(WorkspaceService, calls),
    mcp: createClient(McpService, calls),
    checkpoints: createClient(CheckpointService, calls),
    identity: createClient(IdentityService, calls),
    transport,
    options(user, signal, role) {
      // The user id travels only alongside the service credential, never on its own.
      const headers = serviceToken
        ? { ...serviceCredentialHeaders(serviceToken), [USER_HEADER]: user, ...(role ? { [ROLE_HEADER]: role } : {}) }
        : {};
      return { headers, timeoutMs: options.timeoutMs, ...(signal ? { signal } : {}) };
    },
    serviceOptions() {
      return { headers: serviceToken ? serviceCredentialHeaders(serviceToken) : {}, timeoutMs: options.timeoutMs };
    },
    replicas: () => transport.endpoints(),
    close: () => transport.close(),
  };
}
