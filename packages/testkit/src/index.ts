/** Test kit: the local Messages API server (and the offline demo model it serves). */
export * from './messages-api/script.ts';
export { startMessagesApiServer, type MessagesApiServer, type MessagesApiServerOptions } from './messages-api/server.ts';
export { offlineModelResponder, offlineReply, parseOfflineCommand, OFFLINE_HELP, OFFLINE_INTRO, OFFLINE_MODEL_NAME, type OfflineModelOptions } from './messages-api/offline-model.ts';
export { streamEvents, resolveMessage, encodeSse, type SseEvent } from './messages-api/sse-encoder.ts';
