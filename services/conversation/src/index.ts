/** The conversation service, for embedding (the single-process default) and tests. */
export {
  createConversationService,
  SERVICE_NAME,
  type ConversationServiceInstance,
  type ConversationServiceDeps,
} from './create-conversation-service.ts';
export { readConversationConfig, conversationConfigSchema, type ConversationConfig } from './config.ts';
