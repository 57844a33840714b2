/** Numbers and words of the state machine that the spec fixes. */
import type { Policy, Rejection, RejectionCode } from './types.ts';

/** REQ-BED-019: continuation starts when a response uses this fraction of the window. */
export const CONTINUATION_THRESHOLD = 0.9;
/** REQ-BED-023: the warning indicator from this fraction. */
export const WARNING_THRESHOLD = 0.8;

export const DEFAULT_POLICY: Policy = {
  maxLlmAttempts: 3,
  retryBaseDelayMs: 1000,
  retryMaxDelayMs: 60_000,
  cancelAckTimeoutMs: 5000,
  subAgentTimeoutMs: 600_000,
  maxAutoContinuations: 3,
};

/** User-facing words of every rejection (REQ-BED-002, 006, 015, 016, 021; REQ-BASH-009). */
export const REJECTION_MESSAGES: Readonly<Record<RejectionCode, string>> = {
  agent_busy: 'The agent is busy. You can cancel the current operation and then send your message.',
  cancellation_in_progress: 'Cancellation in progress. Send your message again in a moment.',
  context_exhausted:
    'This conversation has reached its context limit and is read-only. Start a new conversation from its continuation summary.',
  nothing_to_cancel: 'Nothing to cancel: the agent is not working.',
  no_pending_upgrade: 'There is no mode upgrade request waiting for an answer.',
  already_restricted: 'The conversation is already in Restricted mode.',
  sandbox_unavailable:
    'Restricted mode is unavailable: no tool runner has the kernel sandbox (Landlock needs Linux 5.13 or newer). The conversation can only run Unrestricted.',
  sub_agent_driven_by_parent:
    'Sub-agent conversations are driven by their parent. Send your message to the parent conversation.',
  sub_agent_mode_fixed: "A sub-agent's mode is fixed when it is spawned and cannot be changed.",
  conversation_finished: 'This sub-agent has finished; its conversation is read-only.',
  empty_message: 'The message is empty: send some text or at least one image.',
  continuation_unavailable: 'A continuation summary can be requested only while the agent is idle.',
};

export function rejection(code: RejectionCode): Rejection {
  return { code, message: REJECTION_MESSAGES[code] };
}

/** The continuation prompt of spec 000 (REQ-BED-020). */
export const CONTINUATION_PROMPT =
  'The conversation context is nearly full. Please provide a brief continuation summary that could seed a new conversation.\n\n' +
  'Include:\n1. Current task status (if any)\n2. Key files or concepts discussed\n3. Suggested next steps\n\nKeep your response concise.';

export const CONTINUATION_FALLBACK_SUMMARY =
  'Context limit reached. The continuation summary could not be generated. Please start a new conversation.';
export const CONTINUATION_CANCELLED_SUMMARY = 'Continuation cancelled by user.';

export const CANCELLED_CURRENT = 'Cancelled by user';
export const CANCELLED_SKIPPED = 'Skipped due to cancellation';
export const NOT_EXECUTED_CONTEXT = 'Not executed: the context window is nearly full; a continuation summary was requested instead.';
export const LOST_RESULT = 'No result: the work was lost (the worker running it stopped). It may or may not have run.';
export const ALREADY_UNRESTRICTED = 'Already in Unrestricted mode';
export const UPGRADE_APPROVED = 'The user approved the upgrade. The conversation is now in Unrestricted mode.';
export const UPGRADE_DENIED =
  'The user denied the upgrade. The conversation stays in Restricted mode: the filesystem is read-only and patch is disabled.';

export const MODE_NOTICE_UNRESTRICTED =
  'Mode changed to Unrestricted: you may now modify files (patch is enabled) and bash runs without the read-only sandbox.';
export const MODE_NOTICE_RESTRICTED =
  'Mode changed to Restricted: the filesystem is read-only, bash runs in a kernel sandbox with no network, and patch is disabled. Use request_mode_upgrade if you need write access.';
