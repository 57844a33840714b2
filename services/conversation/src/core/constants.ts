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
  sub_agent_driven_by_parent: 'Sub-agent conversations are driven by their parent. Send your message to the parent conversation.',
  sub_agent_mode_fixed: "A sub-agent's mode is fixed when it is spawned and cannot be changed.",
  conversation_finished: 'This sub-agent has finished; its conversation is read-only.',
  empty_message: 'The message is empty: send some text or at least one image.',
  continuation_unavailable: 'A continuation summary can be requested only while the agent is idle.',
  not_queued: 'That message is not waiting any more: it was delivered or withdrawn already.',
  queue_full:
    'Too many messages are waiting (at most 10, with at most 8 MB of images in all). Wait for the agent, or withdraw a waiting message.',
};

/** At most this many messages wait (queue, steer, interrupt) in one conversation. */
export const MAX_PENDING_MESSAGES = 10;
/** Waiting messages live in the state, which every event rewrites: their images (base64 characters) are bounded. */
export const MAX_PENDING_IMAGE_CHARS = 8_000_000;

export function rejection(code: RejectionCode): Rejection {
  return { code, message: REJECTION_MESSAGES[code] };
}

/** The continuation prompt of spec 000 (REQ-BED-020). */
export const CONTINUATION_PROMPT =
  'The conversation context is nearly full. Please provide a brief continuation summary that could seed a new conversation.\n\n' +
  'Include:\n1. Current task status (if any)\n2. Key files or concepts discussed\n3. Suggested next steps\n\nKeep your response concise.\n\n' +
  // The request keeps the turn's tools and tool_choice (so it reads the cached prefix): the model is told, not forced.
  'Answer with text only: do not call any tool.';

/** The error a turn stops with when its owner's budget is spent (docs/state-machine.md, "Budget"). */
export const BUDGET_EXHAUSTED_MESSAGE =
  'Stopped before the next model request: your spending budget is used up, or what is left of it is held for your requests in flight in other conversations. The tools that ran are answered; the conversation goes on once the budget resets or is raised, or your other requests have finished.';

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

/** Asks the model to go on after a text response cut by the output limit (a `system` notice). */
export const MAX_TOKENS_NOTICE =
  'Your previous response was cut off because it reached the output token limit. Continue exactly where it stopped, without repeating what you already wrote.';
/** The same after a response the provider paused without a server-tool block to resume. */
export const PAUSE_TURN_NOTICE =
  'Your previous response was paused before it was finished. Continue exactly where it stopped, without repeating what you already wrote.';

/** "a", "a and b", "a, b and c". */
function listWords(words: readonly string[]): string {
  if (words.length <= 1) return words.join('');
  return `${words.slice(0, -1).join(', ')} and ${words[words.length - 1]}`;
}

/**
 * Tells the model that tool calls were cut by the output limit (they did not run) and how to
 * go on. `limit`: the max_tokens the response had; 0 when not known.
 */
export function cutToolNotice(names: readonly string[], limit: number): string {
  const many = names.length > 1;
  const at = limit > 0 ? ` of ${limit} tokens` : '';
  return (
    `Your ${many ? 'calls' : 'call'} to ${listWords(names)} ${many ? 'were' : 'was'} cut off because the response reached the output limit${at}, ` +
    `so ${many ? 'they' : 'it'} did not run. Split the work into smaller calls (for example, write a large file in several parts) and try again.`
  );
}

/** The error message a refusal shows the user, with the provider's explanation when given. */
export function refusalMessage(explanation: string): string {
  const why = explanation.trim();
  const first = why === '' ? 'The model declined to answer.' : `The model declined to answer: ${why}${/[.!?]$/.test(why) ? '' : '.'}`;
  return `${first} Rephrase your request or send a new message.`;
}
