/** Test kit: the local Messages API server (and the offline demo model it serves). */
export * from './messages-api/script.ts';
export {
  startMessagesApiServer,
  type MessagesApiServer,
  type MessagesApiServerOptions,
  type RequestViolation,
} from './messages-api/server.ts';
export { validateRequest, fakeModel, OFFLINE_MAX_OUTPUT_TOKENS, type FakeModel } from './messages-api/validate-request.ts';
export { createBlockSigner, OFFLINE_SIGNING_KEY, type BlockSigner } from './messages-api/signing.ts';
export {
  offlineModelResponder,
  offlineReply,
  parseOfflineCommand,
  OFFLINE_HELP,
  OFFLINE_INTRO,
  OFFLINE_MODEL_NAME,
  type OfflineModelOptions,
} from './messages-api/offline-model.ts';
export {
  streamEvents,
  resolveMessage,
  messageBody,
  encodeSse,
  type SseEvent,
  type ResolvedMessage,
  type ResolvedBlock,
  type RefusalStopDetails,
} from './messages-api/sse-encoder.ts';
