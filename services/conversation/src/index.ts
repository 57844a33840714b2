/** The conversation service, for embedding (the single-process default) and tests. */
export {
  startConversationService,
  SERVICE_NAME,
  type RunningConversationService,
  type ConversationServiceDeps,
} from './create-conversation-service.ts';
export { readConversationConfig, conversationEnv, type ConversationConfig } from './config.ts';
