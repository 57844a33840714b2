/**
 * Between the pure core's plain types and the protobuf contracts. Both directions live here
 * so every boundary (API, queues, notifications) agrees on one mapping.
 */
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  ContentBlockSchema,
  ConversationStateSchema,
  DeliveryMode as PDeliveryMode,
  ErrorKind as PErrorKind,
  MessageSchema,
  MessageType as PMessageType,
  PendingMessageSchema,
  Mode as PMode,
  StateKind,
  StopReason as PStopReason,
  UsageSchema,
  type ContentBlock as PContentBlock,
  type ConversationEventJob,
  type ConversationState as PConversationState,
  type Message as PMessage,
  type Usage as PUsage,
} from '@bedrock/contracts';
import type {
  ContentBlock,
  ConversationEvent,
  ConversationState,
  DeliveryMode,
  ErrorKind,
  MessageType,
  Mode,
  PhaseKind,
  Policy,
  StopReason,
  Usage,
} from '../core/index.ts';
import { ZERO_USAGE } from '../core/index.ts';
import type { MessageRow } from '../store/conversation-store.ts';

const STATE_KINDS: Record<PhaseKind, StateKind> = {
  idle: StateKind.IDLE,
  awaiting_llm: StateKind.AWAITING_LLM,
  llm_requesting: StateKind.LLM_REQUESTING,
  tool_executing: StateKind.TOOL_EXECUTING,
  cancelling: StateKind.CANCELLING,
  awaiting_sub_agents: StateKind.AWAITING_SUB_AGENTS,
  awaiting_mode_approval: StateKind.AWAITING_MODE_APPROVAL,
  awaiting_continuation: StateKind.AWAITING_CONTINUATION,
  context_exhausted: StateKind.CONTEXT_EXHAUSTED,
  error: StateKind.ERROR,
  completed: StateKind.COMPLETED,
  failed: StateKind.FAILED,
};

export function stateKindToProto(kind: PhaseKind): StateKind {
  return STATE_KINDS[kind];
}

export function modeToProto(mode: Mode): PMode {
  return mode === 'restricted' ? PMode.RESTRICTED : PMode.UNRESTRICTED;
}

const ERROR_KINDS: Record<ErrorKind, PErrorKind> = {
  auth: PErrorKind.AUTH,
  rate_limit: PErrorKind.RATE_LIMIT,
  network: PErrorKind.NETWORK,
  server: PErrorKind.SERVER,
  invalid_request: PErrorKind.INVALID_REQUEST,
  unknown: PErrorKind.UNKNOWN,
  context_exhausted: PErrorKind.CONTEXT_EXHAUSTED,
  timeout: PErrorKind.TIMEOUT,
  cancelled: PErrorKind.CANCELLED,
  refused: PErrorKind.REFUSED,
  budget_exhausted: PErrorKind.BUDGET_EXHAUSTED,
};

export function errorKindToProto(kind: ErrorKind): PErrorKind {
  return ERROR_KINDS[kind];
}

export function errorKindFromProto(kind: PErrorKind): ErrorKind {
  const found = (Object.entries(ERROR_KINDS) as [ErrorKind, PErrorKind][]).find(([, v]) => v === kind);
  return found ? found[0] : 'unknown';
}

const STOP_REASONS: Record<PStopReason, StopReason> = {
  [PStopReason.UNSPECIFIED]: 'unspecified',
  [PStopReason.END_TURN]: 'end_turn',
  [PStopReason.TOOL_USE]: 'tool_use',
  [PStopReason.MAX_TOKENS]: 'max_tokens',
  [PStopReason.STOP_SEQUENCE]: 'stop_sequence',
  [PStopReason.PAUSE_TURN]: 'pause_turn',
  [PStopReason.REFUSAL]: 'refusal',
  [PStopReason.MODEL_CONTEXT_WINDOW_EXCEEDED]: 'model_context_window_exceeded',
  [PStopReason.CANCELLED]: 'cancelled',
};

const STOP_REASONS_TO_PROTO = Object.fromEntries(Object.entries(STOP_REASONS).map(([k, v]) => [v, Number(k)])) as Record<
  StopReason,
  PStopReason
>;

export function stopReasonToProto(reason: StopReason): PStopReason {
  return STOP_REASONS_TO_PROTO[reason] ?? PStopReason.UNSPECIFIED;
}

export function stopReasonFromProto(reason: PStopReason): StopReason {
  return STOP_REASONS[reason] ?? 'unspecified';
}

const MESSAGE_TYPES: Record<MessageType, PMessageType> = {
  user: PMessageType.USER,
  agent: PMessageType.AGENT,
  tool: PMessageType.TOOL,
  system: PMessageType.SYSTEM,
  error: PMessageType.ERROR,
  continuation: PMessageType.CONTINUATION,
};

export function messageTypeToProto(type: MessageType): PMessageType {
  return MESSAGE_TYPES[type];
}

/** Counts a stored usage lacks (it was stored before they existed) are 0. */
export function usageToProto(usage: Usage | null | undefined): PUsage {
  const u = usage ?? ZERO_USAGE;
  return create(UsageSchema, {
    inputTokens: BigInt(u.inputTokens),
    outputTokens: BigInt(u.outputTokens),
    cacheCreationInputTokens: BigInt(u.cacheCreationInputTokens),
    cacheCreation1hInputTokens: BigInt(u.cacheCreation1hInputTokens ?? 0),
    compactionTokens: BigInt(u.compactionTokens ?? 0),
    cacheReadInputTokens: BigInt(u.cacheReadInputTokens),
    thinkingTokens: BigInt(u.thinkingTokens ?? 0),
    webSearchRequests: BigInt(u.webSearchRequests ?? 0),
    webFetchRequests: BigInt(u.webFetchRequests ?? 0),
  });
}

export function usageFromProto(usage: PUsage | undefined): Usage {
  return {
    inputTokens: Number(usage?.inputTokens ?? 0n),
    outputTokens: Number(usage?.outputTokens ?? 0n),
    cacheCreationInputTokens: Number(usage?.cacheCreationInputTokens ?? 0n),
    cacheCreation1hInputTokens: Number(usage?.cacheCreation1hInputTokens ?? 0n),
    compactionTokens: Number(usage?.compactionTokens ?? 0n),
    cacheReadInputTokens: Number(usage?.cacheReadInputTokens ?? 0n),
    thinkingTokens: Number(usage?.thinkingTokens ?? 0n),
    webSearchRequests: Number(usage?.webSearchRequests ?? 0n),
    webFetchRequests: Number(usage?.webFetchRequests ?? 0n),
  };
}

/** The live detail a state line needs ("retrying attempt 2 of 3 in 2s", "tool 2 of 3: bash"). */
export function stateToProto(state: ConversationState, policy: Policy): PConversationState {
  const phase = state.phase;
  const out = create(ConversationStateSchema, { kind: stateKindToProto(phase.kind) });
  switch (phase.kind) {
    case 'llm_requesting':
    case 'awaiting_continuation':
      out.attempt = phase.attempt;
      out.maxAttempts = policy.maxLlmAttempts;
      out.retryDelayMs = BigInt(phase.retry?.delayMs ?? 0);
      break;
    case 'tool_executing':
      out.currentToolUseId = phase.current.id;
      out.currentToolName = phase.current.name;
      out.toolIndex = phase.completed.length + 1;
      out.toolCount = phase.total;
      break;
    case 'awaiting_sub_agents':
      out.pendingSubAgentIds = [...phase.pending];
      out.subAgentCount = phase.agents.length;
      out.toolIndex = phase.completed.length + 1;
      out.toolCount = phase.total;
      out.currentToolName = 'spawn_agents';
      out.currentToolUseId = phase.spawnToolUseId;
      break;
    case 'awaiting_mode_approval':
      out.upgradeReason = phase.reason;
      out.currentToolUseId = phase.toolUseId;
      out.currentToolName = 'request_mode_upgrade';
      break;
    case 'error':
      out.errorMessage = phase.message;
      out.errorKind = errorKindToProto(phase.errorKind);
      break;
    case 'failed':
      out.errorMessage = phase.error;
      out.errorKind = errorKindToProto(phase.errorKind);
      break;
    case 'context_exhausted':
      out.summary = phase.summary;
      break;
    case 'completed':
      out.summary = phase.result;
      break;
    default:
      break;
  }
  if (state.pending) {
    for (const m of state.pending) {
      out.pendingMessages.push(
        create(PendingMessageSchema, { id: m.id, delivery: deliveryToProto(m.delivery), text: m.text, imageCount: m.images.length }),
      );
    }
  }
  return out;
}

const DELIVERY_MODES: Record<DeliveryMode, PDeliveryMode> = {
  reject: PDeliveryMode.REJECT,
  queue: PDeliveryMode.QUEUE,
  steer: PDeliveryMode.STEER,
  interrupt: PDeliveryMode.INTERRUPT,
};

export function deliveryToProto(mode: DeliveryMode): PDeliveryMode {
  return DELIVERY_MODES[mode];
}

/** UNSPECIFIED is reject; null for a value that is none of the modes. */
export function deliveryFromProto(mode: PDeliveryMode): DeliveryMode | null {
  if (mode === PDeliveryMode.UNSPECIFIED) return 'reject';
  const found = (Object.entries(DELIVERY_MODES) as [DeliveryMode, PDeliveryMode][]).find(([, v]) => v === mode);
  return found ? found[0] : null;
}

export function blockToProto(block: ContentBlock): PContentBlock {
  switch (block.type) {
    case 'text':
      return create(ContentBlockSchema, { block: { case: 'text', value: { text: block.text, citationsJson: block.citations ?? '' } } });
    case 'thinking':
      return create(ContentBlockSchema, { block: { case: 'thinking', value: { thinking: block.thinking, signature: block.signature } } });
    case 'redacted_thinking':
      return create(ContentBlockSchema, { block: { case: 'redactedThinking', value: { data: block.data } } });
    case 'server_tool':
      return create(ContentBlockSchema, { block: { case: 'serverTool', value: { blockType: block.blockType, blockJson: block.json } } });
    case 'compaction':
      return create(ContentBlockSchema, { block: { case: 'compaction', value: { content: block.content, blockJson: block.json } } });
    case 'image':
      return create(ContentBlockSchema, {
        block: { case: 'image', value: { mediaType: block.mediaType, data: Buffer.from(block.data, 'base64') } },
      });
    case 'tool_use':
      return create(ContentBlockSchema, {
        block: { case: 'toolUse', value: { id: block.id, name: block.name, inputJson: JSON.stringify(block.input) } },
      });
    case 'tool_result':
      return create(ContentBlockSchema, {
        block: {
          case: 'toolResult',
          value: {
            toolUseId: block.toolUseId,
            content: block.content,
            isError: block.isError,
            cancelled: block.cancelled ?? false,
            displayJson: block.display ? JSON.stringify(block.display) : '',
          },
        },
      });
  }
}

/** Parses a JSON object; anything else becomes `{}` with the raw text kept, so a bad input never crashes. */
function parseObject(json: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(json);
    return value && typeof value === 'object' && !Array.isArray(value) ? (value as Record<string, unknown>) : { value };
  } catch {
    return { _unparsable_input: json };
  }
}

export function blockFromProto(block: PContentBlock): ContentBlock | null {
  switch (block.block.case) {
    case 'text': {
      const { text, citationsJson } = block.block.value;
      return citationsJson ? { type: 'text', text, citations: citationsJson } : { type: 'text', text };
    }
    case 'thinking':
      return { type: 'thinking', thinking: block.block.value.thinking, signature: block.block.value.signature };
    case 'redactedThinking':
      return { type: 'redacted_thinking', data: block.block.value.data };
    case 'serverTool':
      return { type: 'server_tool', blockType: block.block.value.blockType, json: block.block.value.blockJson };
    case 'compaction':
      return { type: 'compaction', content: block.block.value.content, json: block.block.value.blockJson };
    case 'image':
      return { type: 'image', mediaType: block.block.value.mediaType, data: Buffer.from(block.block.value.data).toString('base64') };
    case 'toolUse':
      return { type: 'tool_use', id: block.block.value.id, name: block.block.value.name, input: parseObject(block.block.value.inputJson) };
    case 'toolResult': {
      const v = block.block.value;
      return {
        type: 'tool_result',
        toolUseId: v.toolUseId,
        content: v.content,
        isError: v.isError,
        ...(v.cancelled ? { cancelled: true } : {}),
        ...(v.displayJson ? { display: parseObject(v.displayJson) } : {}),
      };
    }
    default:
      return null;
  }
}

export function messageToProto(row: MessageRow): PMessage {
  return create(MessageSchema, {
    id: row.id,
    conversationId: row.conversationId,
    sequence: BigInt(row.sequence),
    type: messageTypeToProto(row.type),
    content: row.content.map(blockToProto),
    ...(row.usage ? { usage: usageToProto(row.usage) } : {}),
    createdAt: timestampFromDate(row.createdAt),
    stopReason: row.stopReason ? stopReasonToProto(row.stopReason) : PStopReason.UNSPECIFIED,
    stopExplanation: row.stopExplanation,
  });
}

/**
 * A queue event as the core sees it. sub_agent_start is handled by the shell first (the
 * child conversation is created from it), so it is returned separately.
 */
export type DecodedJob =
  | { readonly kind: 'event'; readonly event: ConversationEvent }
  | { readonly kind: 'sub_agent_start'; readonly start: Extract<ConversationEventJob['event'], { case: 'subAgentStart' }>['value'] }
  | { readonly kind: 'empty' };

export function decodeEventJob(job: ConversationEventJob): DecodedJob {
  const e = job.event;
  switch (e.case) {
    case 'llmResponse':
      return {
        kind: 'event',
        event: {
          type: 'llm_response',
          requestId: e.value.requestId,
          // The model's blocks only: a response holds no tool_result and no image.
          content: e.value.content
            .map(blockFromProto)
            .filter((b): b is ContentBlock => b !== null && b.type !== 'tool_result' && b.type !== 'image'),
          stopReason: stopReasonFromProto(e.value.stopReason),
          usage: usageFromProto(e.value.usage),
          maxTokens: e.value.maxTokens,
          cutToolNames: [...e.value.cutToolNames],
          stopExplanation: e.value.stopExplanation,
          notices: [...e.value.notices],
        },
      };
    case 'llmError':
      return {
        kind: 'event',
        event: {
          type: 'llm_error',
          requestId: e.value.requestId,
          errorKind: errorKindFromProto(e.value.kind),
          retryable: e.value.retryable,
          message: e.value.message,
          retryAfterMs: Number(e.value.retryAfterMs),
          aborted: e.value.aborted,
          ...(e.value.aborted && e.value.partialText ? { partialText: e.value.partialText } : {}),
        },
      };
    case 'toolComplete': {
      const v = e.value;
      return {
        kind: 'event',
        event: {
          type: 'tool_complete',
          result: {
            toolUseId: v.toolUseId,
            content: v.content,
            isError: v.isError,
            ...(v.cancelled ? { cancelled: true } : {}),
            ...(v.displayJson ? { display: parseObject(v.displayJson) } : {}),
          },
        },
      };
    }
    case 'subAgentResult':
      return {
        kind: 'event',
        event: {
          type: 'sub_agent_result',
          outcome: {
            agentId: e.value.subAgentId,
            task: '',
            success: e.value.success,
            result: e.value.result,
            ...(e.value.success ? {} : { errorKind: errorKindFromProto(e.value.errorKind) }),
          },
        },
      };
    case 'timerFired':
      return { kind: 'event', event: { type: 'timer_fired', timerId: e.value.timerId } };
    case 'subAgentStart':
      return { kind: 'sub_agent_start', start: e.value };
    case 'subAgentStop':
      return { kind: 'event', event: { type: 'sub_agent_stop', reason: e.value.reason } };
    default:
      return { kind: 'empty' };
  }
}

export function modeFromProto(mode: PMode): Mode | null {
  if (mode === PMode.RESTRICTED) return 'restricted';
  if (mode === PMode.UNRESTRICTED) return 'unrestricted';
  return null;
}
