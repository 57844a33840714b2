/** Names of the queues and channels between services; the payload types are in jobs.proto. */

/** LlmRequestJob, consumed by llm-gateway. */
export const QUEUE_LLM_REQUESTS = 'llm-requests';
/** ToolExecJob for Unrestricted conversations; any runner consumes it. */
export const QUEUE_TOOL_EXEC = 'tool-exec';
/** ToolExecJob for Restricted conversations; only runners with a working sandbox consume it. */
export const QUEUE_TOOL_EXEC_RESTRICTED = 'tool-exec-restricted';
/** ConversationEventJob, consumed by the conversation service. */
export const QUEUE_CONVERSATION_EVENTS = 'conversation-events';
// The Redis keys and channels that carry them (a conversation's notification stream, the
// cancel channel, the runner registry) are laid out by @bedrock/platform's redisKeys.

/** The id of a tool call's result event on `conversation-events`: one per call, whoever runs it and however often. */
export function toolResultEventId(conversationId: string, toolUseId: string): string {
  return `tool-result/${conversationId}/${toolUseId}`;
}

/** The id of an LLM request's result event on `conversation-events` (response or error). */
export function llmResultEventId(requestId: string): string {
  return `llm-result/${requestId}`;
}

/** The run-ledger key of a tool call: claimed before it runs, so it runs at most once. */
export function toolRunKey(conversationId: string, toolUseId: string): string {
  return `tool/${conversationId}/${toolUseId}`;
}

/** The conversation a run-ledger key belongs to (a tool call's), or null for other keys (an LLM request's: liveness only, no content). */
export function conversationOfRunKey(key: string): string | null {
  const m = /^tool\/([^/]+)\//.exec(key);
  return m ? m[1]! : null;
}

/** The run-ledger key of an LLM request: liveness only (a request may be repeated). */
export function llmRunKey(requestId: string): string {
  return `llm/${requestId}`;
}

/**
 * The job id of a tool call on `tool-exec` / `tool-exec-restricted`: one job per call, so a
 * repeated publish is a no-op, and the sweeper can look the job up in either queue.
 */
export function toolExecJobId(conversationId: string, toolUseId: string): string {
  return `${conversationId}/${toolUseId}`;
}

/** The job id of an LLM request on `llm-requests`: the request id itself (unique per conversation step). */
export function llmRequestJobId(requestId: string): string {
  return requestId;
}

/** The id of the event on `conversation-events` that starts a sub-agent (addressed to the sub-agent). */
export function subAgentStartEventId(agentId: string): string {
  return `start/${agentId}`;
}

/** The id of the event on `conversation-events` that stops a sub-agent (addressed to the sub-agent). */
export function subAgentStopEventId(agentId: string): string {
  return `stop/${agentId}`;
}

/** The id of a finished sub-agent's result event on `conversation-events` (addressed to its parent). */
export function subAgentResultEventId(agentId: string): string {
  return `result/${agentId}`;
}
