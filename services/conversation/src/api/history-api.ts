/**
 * ConversationHistoryService: the llm-gateway fetches an LLM request's history when it runs the
 * request's job (the job is a claim check: conversation id and position, docs/conversation.md).
 * Only the service peer `llm-gateway` may call it; the history is the conversation's messages
 * up to `history_through`, made valid for the Messages API, with the continuation prompt
 * appended when one is given (REQ-BED-020). The embedded mode's gateway, in the same process,
 * asks {@link createHistoryAnswers} directly.
 */
import type { ConnectRouter, HandlerContext } from '@connectrpc/connect';
import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { ConversationHistoryService, GetLlmHistoryResponseSchema, GetMcpToolsResponseSchema } from '@bedrock/contracts';
import type { GetLlmHistoryRequest, LlmMessage, McpToolDefinition } from '@bedrock/contracts';
import { inSpan, serveService, servicePeer } from '@bedrock/platform/server';
import { buildLlmMessages } from '../mapping/llm-request.ts';
import type { HistoryReads } from '../store/history-reads.ts';

/** The only service that reads histories. */
export const HISTORY_PEER = 'llm-gateway';

/** The span of a history read (INTERNAL), inside the gateway's `chat` span when it reads in-process. */
const HISTORY_SPAN = 'read history';

/** Longest continuation prompt accepted (the prompt names rejected tool calls; far below this). */
const MAX_PROMPT_CHARS = 1_000_000;

export interface HistoryApiOptions {
  readonly reads: HistoryReads;
  /** The MCP tools of a conversation (mcp/registry.ts); null: no such conversation. Absent: none. */
  readonly mcpTools?: (conversationId: string) => Promise<McpToolDefinition[] | null>;
}

function requireGateway(ctx: HandlerContext): void {
  const peer = servicePeer(ctx);
  if (peer === undefined) {
    throw new ConnectError(
      `missing service credential: ${ConversationHistoryService.typeName} answers only ${HISTORY_PEER}; present its token (BEDROCK_SERVICE_TOKEN_FILE) as "authorization: Bearer <token>"`,
      Code.Unauthenticated,
    );
  }
  if (peer !== HISTORY_PEER) {
    throw new ConnectError(
      `service ${peer} may not read conversation histories: only ${HISTORY_PEER} may call ${ConversationHistoryService.typeName}`,
      Code.PermissionDenied,
    );
  }
}

/** What a request names of its history (an LlmRequestJob's fields, or GetLlmHistoryRequest's). */
export type HistoryClaim = Pick<GetLlmHistoryRequest, 'conversationId' | 'historyThrough' | 'continuationPrompt'>;

/**
 * The answers behind ConversationHistoryService, without the service call: the gRPC handlers
 * below serve them to a gateway in another process; the embedded mode hands them to its
 * in-process gateway directly (no gRPC round trip per LLM request). Shaped as the gateway's
 * `HistorySource`; errors are the ConnectErrors a remote caller gets.
 */
export interface HistoryAnswers {
  fetch(claim: HistoryClaim, signal?: AbortSignal): Promise<LlmMessage[]>;
  mcpTools(conversationId: string, signal?: AbortSignal): Promise<McpToolDefinition[]>;
  close(): void;
}

function checkConversationId(id: string): void {
  if (!id.trim()) throw new ConnectError('conversation_id is required', Code.InvalidArgument);
  if (id.length > 512) throw new ConnectError('conversation_id is too long (at most 512 characters)', Code.InvalidArgument);
}

function checkCancelled(signal: AbortSignal | undefined): void {
  if (signal?.aborted) throw new ConnectError('the history read was cancelled', Code.Canceled);
}

export function createHistoryAnswers(options: HistoryApiOptions): HistoryAnswers {
  const { reads } = options;
  return {
    async fetch(claim, signal) {
      const id = claim.conversationId;
      checkConversationId(id);
      if (claim.historyThrough === 0n) {
        throw new ConnectError(
          'history_through is required (at least 1): the LLM request job names the last message of its history; a job without it predates claim-check jobs and cannot be answered',
          Code.InvalidArgument,
        );
      }
      if (claim.historyThrough > BigInt(Number.MAX_SAFE_INTEGER))
        throw new ConnectError(`history_through ${claim.historyThrough} is out of range`, Code.InvalidArgument);
      if (claim.continuationPrompt.length > MAX_PROMPT_CHARS)
        throw new ConnectError(`continuation_prompt is too long (at most ${MAX_PROMPT_CHARS} characters)`, Code.InvalidArgument);
      checkCancelled(signal);
      const through = Number(claim.historyThrough);
      // A span of its own: in the embedded mode no RPC span shows the read in the turn's trace.
      const read = await inSpan(HISTORY_SPAN, { attributes: { 'gen_ai.conversation.id': id } }, () => reads.historyThrough(id, through));
      checkCancelled(signal);
      if (read.kind === 'not_found') throw new ConnectError(`conversation ${id} not found`, Code.NotFound);
      if (read.kind === 'beyond') {
        throw new ConnectError(
          `history_through ${through} is beyond conversation ${id}'s last message (${read.messageSeq}): the job does not belong to this database`,
          Code.FailedPrecondition,
        );
      }
      return buildLlmMessages(read.messages, claim.continuationPrompt);
    },
    async mcpTools(id, signal) {
      checkConversationId(id);
      checkCancelled(signal);
      const tools = options.mcpTools ? await options.mcpTools(id) : [];
      if (tools === null) throw new ConnectError(`conversation ${id} not found`, Code.NotFound);
      return tools;
    },
    close() {},
  };
}

export function registerHistoryApi(router: ConnectRouter, answers: HistoryAnswers): void {
  serveService(router, ConversationHistoryService, {
    async getLlmHistory(req, ctx) {
      requireGateway(ctx);
      return create(GetLlmHistoryResponseSchema, { messages: await answers.fetch(req, ctx.signal) });
    },
    async getMcpTools(req, ctx) {
      requireGateway(ctx);
      return create(GetMcpToolsResponseSchema, { tools: await answers.mcpTools(req.conversationId, ctx.signal) });
    },
  });
}
