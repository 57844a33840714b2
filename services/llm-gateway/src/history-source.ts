/**
 * Where the gateway gets a request's history. An `llm-requests` job is a claim check: it names
 * the conversation and the last message of the history (`history_through`), not the history;
 * the gateway fetches the turns from the conversation service (ConversationHistoryService,
 * which answers only the service peer `llm-gateway`) when it runs the job. Injected into the
 * worker, so tests and benchmarks pass an in-memory source. Docs: docs/llm-gateway.md.
 */
import type { McpToolDefinition } from '@bedrock/contracts';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { ConversationHistoryService, ErrorKind, type LlmMessage, type LlmRequestJob } from '@bedrock/contracts';
import {
  createBalancedTransport,
  grpcHealthCheck,
  serviceCredentialHeaders,
  traceCarrier,
  type DependencyCheck,
  type Logger,
} from '@bedrock/platform/server';
import { base, type Classified } from './classify-error.ts';

/** What an MCP tool listing may take beyond a history read: servers may be started for it (the conversation service bounds that, BEDROCK_MCP_LIST_TIMEOUT). */
const MCP_LIST_EXTRA_MS = 90_000;

/** What a job says about its history. */
export type HistoryClaim = Pick<LlmRequestJob, 'conversationId' | 'historyThrough' | 'continuationPrompt'>;

export interface HistorySource {
  /**
   * The turns to send, valid for the Messages API, with the continuation prompt appended.
   * Throws a ConnectError (or a network error) when it cannot; see {@link classifyHistoryError}.
   */
  fetch(claim: HistoryClaim, signal?: AbortSignal): Promise<LlmMessage[]>;
  /** The conversation's MCP tools (docs/mcp.md); absent: none. */
  mcpTools?(conversationId: string, signal?: AbortSignal): Promise<McpToolDefinition[]>;
  /** Readiness: resolves while the source can answer (the conversation service's gRPC health); absent when it always can. */
  readonly ready?: DependencyCheck['check'];
  close(): void;
}

export interface ConversationHistorySourceOptions {
  /** BEDROCK_CONVERSATION_URL: base URLs of the conversation service's gRPC API (a host name stands for all its addresses). */
  readonly targets: readonly (string | URL)[];
  /** The gateway's own service token (BEDROCK_SERVICE_TOKEN_FILE); without one every call is refused. */
  readonly serviceToken: string | undefined;
  /** Deadline of one fetch, ms. */
  readonly timeoutMs: number;
  /** How often host names are resolved again, ms (0: only after failures). */
  readonly resolveIntervalMs?: number;
  readonly logger?: Logger;
}

/** A Connect gRPC client of ConversationHistoryService, spread over every conversation replica. */
export function createConversationHistorySource(options: ConversationHistorySourceOptions): HistorySource {
  const transport = createBalancedTransport({
    name: 'conversation',
    targets: options.targets,
    // Histories with images can be large (the web-bff client allows the same).
    transport: { readMaxBytes: 256 * 1024 * 1024 },
    // Pings notice a dead replica on an idle connection.
    session: { pingIntervalMs: 30_000, pingIdleConnection: true },
    // GetLlmHistory is declared NO_SIDE_EFFECTS: a call whose connection broke goes to another replica.
    ...(options.resolveIntervalMs !== undefined ? { resolveIntervalMs: options.resolveIntervalMs } : {}),
    ...(options.logger ? { logger: options.logger } : {}),
  });
  const client = createClient(ConversationHistoryService, transport);
  const headers = options.serviceToken ? serviceCredentialHeaders(options.serviceToken) : {};
  return {
    async fetch(claim, signal) {
      const res = await client.getLlmHistory(
        { conversationId: claim.conversationId, historyThrough: claim.historyThrough, continuationPrompt: claim.continuationPrompt },
        // The active span (the `chat` span of the job) as traceparent: the history read joins the turn's trace.
        { headers: { ...headers, ...traceCarrier() }, timeoutMs: options.timeoutMs, ...(signal ? { signal } : {}) },
      );
      return res.messages;
    },
    async mcpTools(conversationId, signal) {
      try {
        const res = await client.getMcpTools(
          { conversationId },
          { headers: { ...headers, ...traceCarrier() }, timeoutMs: options.timeoutMs + MCP_LIST_EXTRA_MS, ...(signal ? { signal } : {}) },
        );
        return res.tools;
      } catch (err) {
        // A conversation service from before MCP: no MCP tools.
        if (err instanceof ConnectError && err.code === Code.Unimplemented) return [];
        throw err;
      }
    },
    ready: grpcHealthCheck('conversation', transport).check,
    close: () => transport.close(),
  };
}

/**
 * An in-memory source (tests, benchmarks, tools that build jobs by hand): `lookup` answers a
 * claim with its turns, or undefined for an unknown conversation (NOT_FOUND).
 */
export function memoryHistorySource(lookup: (claim: HistoryClaim) => readonly LlmMessage[] | undefined): HistorySource {
  return {
    async fetch(claim, signal) {
      if (signal?.aborted) throw new ConnectError('the fetch was cancelled', Code.Canceled);
      const messages = lookup(claim);
      if (!messages) throw new ConnectError(`conversation ${claim.conversationId} not found`, Code.NotFound);
      return [...messages];
    },
    close() {},
  };
}

/**
 * A source in this process (the embedded mode's conversation service, a test's) bounded as the
 * gRPC client is: a history read longer than `timeoutMs` (BEDROCK_HISTORY_TIMEOUT), or an MCP
 * listing longer than that plus MCP_LIST_EXTRA_MS, fails with DEADLINE_EXCEEDED (a retryable
 * network error); a cancelled job stops waiting at once.
 */
export function withDeadline(source: HistorySource, timeoutMs: number): HistorySource {
  const bounded = <T>(what: string, ms: number, outer: AbortSignal | undefined, work: (signal: AbortSignal) => Promise<T>): Promise<T> => {
    const inner = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let onAbort: (() => void) | undefined;
    const stop = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        inner.abort();
        reject(new ConnectError(`${what} took longer than ${ms} ms`, Code.DeadlineExceeded));
      }, ms);
      onAbort = () => {
        inner.abort();
        reject(new ConnectError(`${what} was cancelled`, Code.Canceled));
      };
      if (outer?.aborted) onAbort();
      else outer?.addEventListener('abort', onAbort, { once: true });
    });
    return Promise.race([work(inner.signal), stop]).finally(() => {
      clearTimeout(timer);
      if (onAbort) outer?.removeEventListener('abort', onAbort);
    });
  };
  const { mcpTools, ready } = source;
  return {
    fetch: (claim, signal) => bounded('the history read', timeoutMs, signal, (s) => source.fetch(claim, s)),
    ...(mcpTools
      ? {
          mcpTools: (id, signal) =>
            bounded('the MCP tool listing', timeoutMs + MCP_LIST_EXTRA_MS, signal, (s) => mcpTools.call(source, id, s)),
        }
      : {}),
    ...(ready ? { ready } : {}),
    close: () => source.close(),
  };
}

const RETRY = 'The request will be retried.';

/**
 * What a failed history fetch means for the state machine: the conversation service not
 * reachable (or overloaded, or slow) is a retryable NETWORK error like a provider connection
 * failure, so the state machine retries with its backoff; a refused credential is AUTH and an
 * unknown conversation or position INVALID_REQUEST, neither retryable.
 */
export function classifyHistoryError(err: unknown): Classified {
  const e = ConnectError.from(err);
  const what = `Could not fetch the conversation history from the conversation service (${Code[e.code] ?? e.code}: ${e.rawMessage})`;
  switch (e.code) {
    case Code.Unauthenticated:
    case Code.PermissionDenied:
      return base(
        ErrorKind.AUTH,
        false,
        `${what}. The gateway's service token (BEDROCK_SERVICE_TOKEN_FILE) must be listed as "llm-gateway" in the conversation service's BEDROCK_SERVICE_PEERS_FILE.`,
      );
    case Code.NotFound:
    case Code.FailedPrecondition:
    case Code.InvalidArgument:
      return base(ErrorKind.INVALID_REQUEST, false, `${what}. The request cannot be answered; retrying will not help.`);
    default:
      // Unavailable, DeadlineExceeded, ResourceExhausted, Internal, Unknown (a socket error), ...
      return base(ErrorKind.NETWORK, true, `${what}. ${RETRY}`);
  }
}
