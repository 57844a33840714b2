/** The pure conversation state machine: see docs/state-machine.md. */
export * from './types.ts';
export * from './constants.ts';
export { transition, step, initialState, type StepEvent, type BeginLlmRequest } from './transition.ts';
export { formatOutcomes } from './tool-calls.ts';
export { pendingMessageId } from './user-input.ts';
export { makeContext, type ContextInit } from './context.ts';
export { buildLlmHistory, checkToolChain, SYSTEM_NOTICE_PREFIX, type LlmTurn, type HistoryMessage } from './history.ts';
export { contextTokens, addUsage, subtractUsage, ZERO_USAGE } from './usage.ts';
export { buildContinuationPrompt } from './continuation.ts';
