/** Names of the queues and channels between services; the payload types are in jobs.proto. */

/** LlmRequestJob, consumed by llm-gateway. */
export const QUEUE_LLM_REQUESTS = 'llm-requests';
/** ToolExecJob for Unrestricted conversations; any runner consumes it. */
export const QUEUE_TOOL_EXEC = 'tool-exec';
/** ToolExecJob for Restricted conversations; only runners with a working sandbox consume it. */
export const QUEUE_TOOL_EXEC_RESTRICTED = 'tool-exec-restricted';
/** ConversationEventJob, consumed by the conversation service. */
export const QUEUE_CONVERSATION_EVENTS = 'conversation-events';
/** CancelSignal, published to every gateway and runner. */
export const CHANNEL_CANCEL = 'bedrock:cancel';
/** RunnerCapabilities, reported by tool-runners (a hash keyed by runner id, with expiry). */
export const RUNNER_CAPABILITIES_KEY = 'bedrock:runners';

/** The Redis Stream key that holds a conversation's notifications (ConversationEvent). */
export function notificationStreamKey(conversationId: string): string {
  return `bedrock:conv:${conversationId}:events`;
}
