/**
 * ConversationHistoryService: the llm-gateway fetches an LLM request's history when it runs the
 * request's job (the job is a claim check: conversation id and position, docs/conversation.md).
 * Only the service peer `llm-gateway` may call it; the history is the conversation's messages
 * up to `history_through`, made valid for the Messages API, with the continuation prompt
 * appended when one is given (REQ-BED-020).
 */
import type { ConnectRouter, HandlerContext } from '@connectrpc/connect';
import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { ConversationHistoryService, GetLlmHistoryResponseSchema, GetMcpToolsResponseSchema } from '@bedrock/contracts';
import type { McpToolDefinition } from '@bedrock/contracts';
import { serveService, servicePeer, type Logger } from '@bedrock/platform/server';
import { buildLlmMessages } from '../mapping/llm-request.ts';
import type { HistoryReads } from '../store/history-reads.ts';

/** The only service that reads histories. */
export const HISTORY_PEER = 'llm-gateway';

/** Longest continuation prompt accepted (the prompt names rejected tool calls; far below this). */
const MAX_PROMPT_CHARS = 1_000_000;

export interface HistoryApiOptions {
  readonly reads: HistoryReads;
  readonly logger: Logger;
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

export function registerHistoryApi(router: ConnectRouter, options: HistoryApiOptions): void {
  const { reads } = options;
  serveService(router, ConversationHistoryService, {
    async getLlmHistory(req, ctx) {
      requireGateway(ctx);
      const id = req.conversationId;
      if (!id.trim()) throw new ConnectError('conversation_id is required', Code.InvalidArgument);
      if (id.length > 512) throw new ConnectError('conversation_id is too long (at most 512 characters)', Code.InvalidArgument);
      if (req.historyThrough === 0n) {
        throw new ConnectError(
          'history_through is required (at least 1): the LLM request job names the last message of its history; a job without it predates claim-check jobs and cannot be answered',
          Code.InvalidArgument,
        );
      }
      if (req.historyThrough > BigInt(Number.MAX_SAFE_INTEGER))
        throw new ConnectError(`history_through ${req.historyThrough} is out of range`, Code.InvalidArgument);
      if (req.continuationPrompt.length > MAX_PROMPT_CHARS)
        throw new ConnectError(`continuation_prompt is too long (at most ${MAX_PROMPT_CHARS} characters)`, Code.InvalidArgument);
      const through = Number(req.historyThrough);
      const read = await reads.historyThrough(id, through);
      if (read.kind === 'not_found') throw new ConnectError(`conversation ${id} not found`, Code.NotFound);
      if (read.kind === 'beyond') {
        throw new ConnectError(
          `history_through ${through} is beyond conversation ${id}'s last message (${read.messageSeq}): the job does not belong to this database`,
          Code.FailedPrecondition,
        );
      }
      return create(GetLlmHistoryResponseSchema, { messages: buildLlmMessages(read.messages, req.continuationPrompt) });
    },
    async getMcpTools(req, ctx) {
      requireGateway(ctx);
      const id = req.conversationId;
      if (!id.trim()) throw new ConnectError('conversation_id is required', Code.InvalidArgument);
      if (id.length > 512) throw new ConnectError('conversation_id is too long (at most 512 characters)', Code.InvalidArgument);
      const tools = options.mcpTools ? await options.mcpTools(id) : [];
      if (tools === null) throw new ConnectError(`conversation ${id} not found`, Code.NotFound);
      return create(GetMcpToolsResponseSchema, { tools });
    },
  });
}
