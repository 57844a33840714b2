/**
 * Types of the pure conversation state machine (spec 000, REQ-BED-001..024). Everything here is
 * plain, JSON-serialisable data: the state is stored as-is in Postgres, effects become outbox
 * rows, events arrive from RPCs and queues. No I/O, no clocks, no random ids: time is relative
 * (delays), ids are derived from the conversation id and the state's counters.
 */
import type { ToolName } from '@bedrock/contracts/tools';

export type Mode = 'restricted' | 'unrestricted';

/** Why an LLM request (or a sub-agent) failed (REQ-BED-006, REQ-BED-024). */
export type ErrorKind =
  | 'auth'
  | 'rate_limit'
  | 'network'
  | 'server'
  | 'invalid_request'
  | 'unknown'
  | 'context_exhausted'
  | 'timeout'
  | 'cancelled'
  /** The model declined to answer (stop reason `refusal`). */
  | 'refused'
  /** The user's spending budget was spent: the turn stopped before its next LLM request. */
  | 'budget_exhausted';

/**
 * Token counts of one response, or a sum of them (REQ-BED-012). The last three are absent in
 * states and messages stored before they existed: absent means 0 (`addUsage` reads them so).
 */
export interface Usage {
  readonly inputTokens: number;
  /** Thinking tokens included. */
  readonly outputTokens: number;
  readonly cacheCreationInputTokens: number;
  /** Of `cacheCreationInputTokens`, the 1-hour cache writes (2x input; the rest 5-minute, 1.25x). Absent: 0. */
  readonly cacheCreation1hInputTokens?: number;
  /** Of the counts, the provider's compaction iterations' total: billed, not in the context window. */
  readonly compactionTokens?: number;
  readonly cacheReadInputTokens: number;
  /** Of `outputTokens`, those spent thinking (0 when the provider does not say). */
  readonly thinkingTokens?: number;
  /** Server tool calls the provider ran (and bills). */
  readonly webSearchRequests?: number;
  readonly webFetchRequests?: number;
}

/** A tool call the model asked for. `input` is the parsed JSON object. */
export interface ToolCall {
  readonly id: string;
  readonly name: string;
  readonly input: Readonly<Record<string, unknown>>;
}

export interface ToolResult {
  readonly toolUseId: string;
  readonly content: string;
  readonly isError: boolean;
  /** Synthesised because the tool was cancelled, skipped or lost. */
  readonly cancelled?: boolean;
  /** Rendering hints for user interfaces (e.g. `{ diff }` for patch). */
  readonly display?: Readonly<Record<string, unknown>>;
}

/**
 * Blocks of messages. The model's blocks (text with citations, thinking, redacted thinking,
 * server-tool blocks) are kept verbatim, in the order the model produced them, and sent back
 * so: signatures and the provider's JSON must not change.
 */
export type ContentBlock =
  /** `citations`: the text block's `citations` array exactly as the provider returned it, JSON (agent text only). */
  | { readonly type: 'text'; readonly text: string; readonly citations?: string }
  /** The model's reasoning; `thinking` may be empty (display omitted) and is still kept for its signature. */
  | { readonly type: 'thinking'; readonly thinking: string; readonly signature: string }
  /** Reasoning the provider encrypted; opaque. */
  | { readonly type: 'redacted_thinking'; readonly data: string }
  /** A block of a tool the provider ran (server_tool_use, web_search_tool_result, ...): `json` is the whole block. */
  | { readonly type: 'server_tool'; readonly blockType: string; readonly json: string }
  /** The provider's summary of the conversation before it (server-side compaction): `json` is the whole block, sent back verbatim. */
  | { readonly type: 'compaction'; readonly content: string; readonly json: string }
  /** Image bytes, base64. */
  | { readonly type: 'image'; readonly mediaType: string; readonly data: string }
  | { readonly type: 'tool_use'; readonly id: string; readonly name: string; readonly input: Readonly<Record<string, unknown>> }
  | ({ readonly type: 'tool_result' } & ToolResult);

/** user: the human; agent: the model; tool: results; system: notices to the agent (mode changes);
 * error: shown to the user, never sent to the model; continuation: the summary (REQ-BED-020). */
export type MessageType = 'user' | 'agent' | 'tool' | 'system' | 'error' | 'continuation';

/** A message as the state machine asks for it to be persisted; the shell assigns id and sequence. */
export interface NewMessage {
  readonly type: MessageType;
  readonly content: readonly ContentBlock[];
  readonly usage?: Usage;
  /** Agent messages: why the response ended (max_tokens: cut and continued; refusal: declined). */
  readonly stopReason?: StopReason;
  /** Refusals: the provider's explanation, when it gave one. */
  readonly stopExplanation?: string;
}

/** The outcome of one sub-agent, as aggregated for the parent (REQ-BED-008). */
export interface SubAgentOutcome {
  readonly agentId: string;
  readonly task: string;
  readonly success: boolean;
  readonly result: string;
  readonly errorKind?: ErrorKind;
}

/** A retry waiting for its backoff timer; no request is in flight meanwhile. */
export interface PendingRetry {
  readonly timerId: string;
  readonly delayMs: number;
}

/**
 * The conversation's phase (spec "ConvState"). Each busy phase names exactly what it waits
 * for (a request id, a tool_use id, sub-agent ids, a timer id); an event that answers
 * something else is a no-op (docs/design.md, "the life of an event", rule 4).
 */
export type Phase =
  | { readonly kind: 'idle' }
  /** Transient: a user message was accepted and the LLM request is being prepared. Never persisted. */
  | { readonly kind: 'awaiting_llm' }
  | {
      readonly kind: 'llm_requesting';
      /** The request in flight, or the one to be sent when `retry`'s timer fires. */
      readonly requestId: string;
      /** 1-based; at most MAX_LLM_ATTEMPTS. */
      readonly attempt: number;
      readonly retry: PendingRetry | null;
      /** Requests sent in this turn to continue a response cut by max_tokens / pause_turn (or to ask again at the output limit). */
      readonly autoContinuations: number;
      /**
       * The max_tokens this request asks for; 0: the service's default. Set to the model's
       * output limit when a tool call was cut; kept by retries and by the continuations of the
       * same response. (Absent in states stored before it existed: 0.)
       */
      readonly maxTokens: number;
    }
  | {
      readonly kind: 'tool_executing';
      readonly current: ToolCall;
      readonly remaining: readonly ToolCall[];
      readonly completed: readonly ToolResult[];
      /** Tool calls in the response (for "tool n of m"). */
      readonly total: number;
    }
  | {
      readonly kind: 'cancelling';
      /** The aborted LLM request; its answer (response, error or abort ack) ends the phase. */
      readonly requestId: string;
      /** Fires if the acknowledgement is lost, so cancelling cannot get stuck. */
      readonly timerId: string;
    }
  | {
      readonly kind: 'awaiting_sub_agents';
      /** The spawn_agents call whose result aggregates the sub-agents. */
      readonly spawnToolUseId: string;
      readonly agents: readonly { readonly agentId: string; readonly task: string }[];
      readonly pending: readonly string[];
      readonly outcomes: readonly SubAgentOutcome[];
      readonly timerId: string;
      readonly remaining: readonly ToolCall[];
      readonly completed: readonly ToolResult[];
      readonly total: number;
    }
  | {
      readonly kind: 'awaiting_mode_approval';
      /** The request_mode_upgrade call. */
      readonly toolUseId: string;
      readonly reason: string;
      readonly remaining: readonly ToolCall[];
      readonly completed: readonly ToolResult[];
      readonly total: number;
    }
  | {
      readonly kind: 'awaiting_continuation';
      readonly requestId: string;
      readonly attempt: number;
      readonly retry: PendingRetry | null;
      /** Tools requested in the triggering response and not executed (REQ-BED-019/020). */
      readonly rejectedToolCalls: readonly ToolCall[];
      readonly triggerUsage: Usage;
    }
  | { readonly kind: 'context_exhausted'; readonly summary: string; readonly finalUsage: Usage }
  | { readonly kind: 'error'; readonly message: string; readonly errorKind: ErrorKind }
  /** Sub-agents only, terminal: the result was submitted. */
  | { readonly kind: 'completed'; readonly result: string; readonly success: boolean }
  /** Sub-agents only, terminal: failed, timed out, stopped or exhausted its context. */
  | { readonly kind: 'failed'; readonly error: string; readonly errorKind: ErrorKind };

export type PhaseKind = Phase['kind'];

/**
 * How a user message is delivered when the agent is busy (docs/state-machine.md, "Delivery
 * modes"): `reject` refuses it (REQ-BED-002, the default); `queue` keeps it until the turn
 * comes to rest; `steer` hands it to the model at the next tool boundary (with the tool
 * results) or, if the turn ends first, as the next message; `interrupt` cancels the turn and
 * sends it once the cancel is complete. At rest every mode sends at once.
 */
export type DeliveryMode = 'reject' | 'queue' | 'steer' | 'interrupt';

/** A user message waiting in the conversation's state to be delivered. */
export interface PendingMessage {
  /** `${conversationId}/q/${seq}`: the transition that accepted it. */
  readonly id: string;
  readonly delivery: 'queue' | 'steer' | 'interrupt';
  readonly text: string;
  readonly images: readonly ImageInput[];
}

/** The whole persisted state of a conversation. */
export interface ConversationState {
  readonly phase: Phase;
  /** REQ-BED-014..016; always 'unrestricted' when the sandbox is unavailable. */
  readonly mode: Mode;
  /** Accepted transitions so far; effect and timer ids derive from it. */
  readonly seq: number;
  /** LLM requests issued so far; request ids derive from it. */
  readonly llmRequests: number;
  /** Usage of the last response: what the context holds now (REQ-BED-012). */
  readonly lastUsage: Usage | null;
  /** Sum over every response. */
  readonly totalUsage: Usage;
  /** The 80% warning was given (REQ-BED-023); given once. */
  readonly contextWarned: boolean;
  /**
   * Messages sent with delivery queue, steer or interrupt that wait, in the order they arrived.
   * Present only when not empty (absent in states stored before it existed: none).
   */
  readonly pending?: readonly PendingMessage[];
}

export type ContextExhaustionBehavior = 'threshold_continuation' | 'intentionally_unhandled';

/** Fixed facts about a conversation and the policies that apply to it. */
export interface ConversationContext {
  readonly conversationId: string;
  /** REQ-BED-010: fixed at creation. */
  readonly cwd: string;
  readonly model: string;
  /** From the model registry; unknown models get the smallest known window (REQ-BED-022). */
  readonly contextWindow: number;
  /** From the model registry: the largest max_tokens the model accepts for one response. */
  readonly maxOutputTokens: number;
  readonly isSubAgent: boolean;
  /** Set for sub-agents. */
  readonly parentId: string | null;
  /** A Landlock-capable runner exists, so Restricted mode exists (REQ-BED-014). */
  readonly sandboxAvailable: boolean;
  readonly contextExhaustionBehavior: ContextExhaustionBehavior;
  readonly policy: Policy;
  /**
   * What the owner may still spend (micro-dollars) before their tightest budget is reached, as
   * the shell read it for this event; null: no budget. At 0 or below no LLM request is made:
   * the turn stops at this boundary (docs/state-machine.md, "Budget").
   */
  readonly remainingBudgetMicros: number | null;
}

/** Tunables, in milliseconds where they are durations. */
export interface Policy {
  /** LLM attempts per request, the first included (REQ-BED-006). Default 3. */
  readonly maxLlmAttempts: number;
  /** Backoff before attempt n+1 is retryBaseDelayMs * 2^(n-1), at least retry-after, at most retryMaxDelayMs. Default 1000. */
  readonly retryBaseDelayMs: number;
  /** Default 60000. */
  readonly retryMaxDelayMs: number;
  /** How long Cancelling waits for the gateway's abort acknowledgement. Default 5000. */
  readonly cancelAckTimeoutMs: number;
  /** How long a parent waits for its sub-agents. Default 600000 (10 min). */
  readonly subAgentTimeoutMs: number;
  /** Extra requests to finish a response cut by max_tokens or pause_turn, per turn. Default 3. */
  readonly maxAutoContinuations: number;
}

export interface ImageInput {
  readonly mediaType: string;
  /** base64 */
  readonly data: string;
}

/** Stop reasons of the Messages API; 'unspecified' means the stream ended without one. */
export type StopReason =
  | 'end_turn'
  | 'tool_use'
  | 'max_tokens'
  | 'stop_sequence'
  | 'pause_turn'
  | 'refusal'
  | 'model_context_window_exceeded'
  /** Bedrock's own: the user cancelled while the answer streamed (the message keeps what had streamed). */
  | 'cancelled'
  | 'unspecified';

/** What a tool call had printed when the user stopped it (its live output, as the service read it). */
export interface ToolOutputSeen {
  readonly toolUseId: string;
  readonly text: string;
}

export type ConversationEvent =
  // From users (through the API).
  /** `delivery` absent: reject. `toolOutput` (an interrupt): as user_cancel's. */
  | {
      readonly type: 'user_message';
      readonly text: string;
      readonly images: readonly ImageInput[];
      readonly delivery?: DeliveryMode;
      readonly toolOutput?: ToolOutputSeen;
    }
  /** Withdraws a pending message (PendingMessage.id) before it is delivered. */
  | { readonly type: 'user_cancel_queued'; readonly queuedId: string }
  /**
   * `toolOutput`: what the running tool had printed, as its watchers saw it stream (read from the
   * notification stream by the service); kept above the marker in that tool's cancelled result
   * when it is still the one running.
   */
  | { readonly type: 'user_cancel'; readonly toolOutput?: ToolOutputSeen }
  | { readonly type: 'user_approve_upgrade' }
  | { readonly type: 'user_deny_upgrade' }
  | { readonly type: 'user_request_downgrade' }
  | { readonly type: 'user_trigger_continuation' }
  // From the llm-gateway.
  | {
      readonly type: 'llm_response';
      readonly requestId: string;
      /** The response's complete blocks, in order (no tool_result, no image). */
      readonly content: readonly ContentBlock[];
      readonly stopReason: StopReason;
      readonly usage: Usage;
      /** The max_tokens the request was sent with; absent or 0: not reported. */
      readonly maxTokens?: number;
      /** Tool calls the output limit cut before they were complete (left out of `content`). */
      readonly cutToolNames?: readonly string[];
      /** refusal: the provider's explanation, when it gave one. */
      readonly stopExplanation?: string;
      /** For the user, not the model: how the request was sent (the gateway's notices). */
      readonly notices?: readonly string[];
    }
  | {
      readonly type: 'llm_error';
      readonly requestId: string;
      readonly errorKind: ErrorKind;
      readonly retryable: boolean;
      readonly message: string;
      /** Provider hint, 0 when none. */
      readonly retryAfterMs: number;
      /** This is the acknowledgement of an abort. */
      readonly aborted: boolean;
      /** With `aborted`: the answer text that had streamed (what the user saw), if any. */
      readonly partialText?: string;
    }
  // From tool-runners.
  | { readonly type: 'tool_complete'; readonly result: ToolResult }
  // Between conversations.
  | { readonly type: 'sub_agent_result'; readonly outcome: SubAgentOutcome }
  /** First event of a sub-agent: its task, from the parent. */
  | { readonly type: 'sub_agent_start'; readonly task: string }
  /** The parent no longer waits (cancel or timeout). */
  | { readonly type: 'sub_agent_stop'; readonly reason: string }
  // From timers (scheduled by `schedule_timer` effects).
  | { readonly type: 'timer_fired'; readonly timerId: string }
  /**
   * Recovery: the work this conversation waits on is gone (a crashed worker, lost jobs).
   * `atSeq`: the `seq` of the state recovery examined; when the state has moved on since
   * (an answer arrived meanwhile), the event is a no-op.
   */
  | { readonly type: 'work_lost'; readonly reason: string; readonly atSeq?: number };

export type EventType = ConversationEvent['type'];

/** What the shell tells clients beyond "state changed" and "message persisted" (which it derives). */
export type Notification =
  | {
      readonly kind: 'retry_scheduled';
      readonly attempt: number;
      readonly maxAttempts: number;
      readonly delayMs: number;
      readonly errorKind: ErrorKind;
      readonly message: string;
    }
  | { readonly kind: 'mode_upgrade_requested'; readonly toolUseId: string; readonly reason: string }
  | { readonly kind: 'mode_changed'; readonly mode: Mode; readonly notice: string }
  | { readonly kind: 'context_warning'; readonly usedTokens: number; readonly contextWindow: number }
  | { readonly kind: 'context_exhausted'; readonly summary: string }
  | {
      readonly kind: 'sub_agent_progress';
      readonly agentId: string;
      readonly task: string;
      readonly success: boolean;
      readonly result: string;
      readonly finishedCount: number;
      readonly totalCount: number;
    }
  | { readonly kind: 'error'; readonly message: string; readonly errorKind: ErrorKind }
  /** A notice for the user only (never persisted, never sent to the model). */
  | { readonly kind: 'notice'; readonly text: string };

export type TimerPurpose = 'retry' | 'cancel_timeout' | 'sub_agent_timeout';

/**
 * Effects are data; the shell runs them after the state is committed (REQ-BED-007).
 * Every effect has a deterministic `id` (conversation id, transition number, position),
 * used as the outbox key, the queue job id and the idempotency key downstream.
 */
export type Effect =
  | { readonly type: 'persist_message'; readonly id: string; readonly message: NewMessage }
  | {
      readonly type: 'request_llm';
      readonly id: string;
      readonly requestId: string;
      readonly attempt: number;
      readonly purpose: 'turn' | 'continuation';
      /**
       * The conversation's static tool set. A continuation defines them too (the history's
       * tool_use blocks need their definitions) and the gateway forbids their use there.
       */
      readonly toolNames: readonly ToolName[];
      /** max_tokens to ask for; 0: the service's default. */
      readonly maxTokens: number;
      /** continuation: tools that were requested but not executed, to mention in the prompt. */
      readonly rejectedToolCalls: readonly ToolCall[];
    }
  | { readonly type: 'abort_llm'; readonly id: string; readonly requestId: string }
  | {
      readonly type: 'execute_tool';
      readonly id: string;
      readonly toolUseId: string;
      readonly name: string;
      readonly input: Readonly<Record<string, unknown>>;
      readonly mode: Mode;
    }
  | { readonly type: 'kill_tool'; readonly id: string; readonly toolUseId: string }
  | {
      readonly type: 'schedule_timer';
      readonly id: string;
      readonly timerId: string;
      readonly delayMs: number;
      readonly purpose: TimerPurpose;
    }
  | { readonly type: 'cancel_timer'; readonly id: string; readonly timerId: string }
  | {
      readonly type: 'spawn_sub_agent';
      readonly id: string;
      readonly agentId: string;
      readonly task: string;
      readonly mode: Mode;
      readonly spawnToolUseId: string;
      readonly index: number;
    }
  | { readonly type: 'stop_sub_agent'; readonly id: string; readonly agentId: string; readonly reason: string }
  | { readonly type: 'notify_parent'; readonly id: string; readonly parentId: string; readonly outcome: SubAgentOutcome }
  | { readonly type: 'notify'; readonly id: string; readonly notification: Notification };

export type EffectType = Effect['type'];

export type RejectionCode =
  | 'agent_busy'
  | 'cancellation_in_progress'
  | 'context_exhausted'
  | 'nothing_to_cancel'
  | 'no_pending_upgrade'
  | 'already_restricted'
  | 'sandbox_unavailable'
  | 'sub_agent_driven_by_parent'
  | 'sub_agent_mode_fixed'
  | 'conversation_finished'
  | 'empty_message'
  | 'continuation_unavailable'
  | 'not_queued'
  | 'queue_full';

/** A refused event: nothing changes, and the caller gets `message` (user-facing, actionable). */
export interface Rejection {
  readonly code: RejectionCode;
  readonly message: string;
}

export type TransitionResult =
  | { readonly ok: true; readonly state: ConversationState; readonly effects: readonly Effect[] }
  | { readonly ok: false; readonly rejection: Rejection };
