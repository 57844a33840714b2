/** The LLM gateway, for embedding (the single-process default) and tests. */
export { createLlmGateway, type LlmGateway, type LlmGatewayDeps } from './create-llm-gateway.ts';
export { readLlmGatewayConfig, llmGatewayConfigSchema, type LlmGatewayConfig } from './config.ts';
export { runLlmJob, runLlmRequest, type LlmOutcome, type LlmRequest, type RunDeps, type RunOptions } from './run-llm-request.ts';
export {
  createConversationHistorySource,
  memoryHistorySource,
  classifyHistoryError,
  type HistoryClaim,
  type HistorySource,
} from './history-source.ts';
export { resultEventId } from './llm-worker.ts';
