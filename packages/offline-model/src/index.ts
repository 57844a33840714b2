/** The local Messages API server, its scripted responses for tests, its request validator, and the offline demo model. */
export * from './script.ts';
export { startMessagesApiServer, type MessagesApiServer, type MessagesApiServerOptions, type RequestViolation } from './server.ts';
export { validateRequest, fakeModel, OFFLINE_MAX_OUTPUT_TOKENS, type FakeModel } from './validate-request.ts';
export { PromptCache, prefixUnits, minCacheableTokens, CACHE_LOOKBACK_BLOCKS, type PromptCacheUsage } from './prompt-cache.ts';
export { COMPACTION_BETA, COMPACT_EDIT_TYPE, DEFAULT_COMPACTION_TRIGGER, MIN_COMPACTION_TRIGGER, compactionModel } from './compaction.ts';
export { createBlockSigner, OFFLINE_SIGNING_KEY, type BlockSigner } from './signing.ts';
export {
  offlineModelResponder,
  offlineReply,
  parseOfflineCommand,
  OFFLINE_HELP,
  OFFLINE_INTRO,
  OFFLINE_MODEL_NAME,
  type OfflineModelOptions,
} from './offline-model.ts';
export {
  streamEvents,
  resolveMessage,
  messageBody,
  encodeSse,
  type SseEvent,
  type ResolvedMessage,
  type ResolvedBlock,
  type RefusalStopDetails,
} from './sse-encoder.ts';
