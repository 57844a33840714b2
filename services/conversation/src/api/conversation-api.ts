/**
 * `bedrock.v1.ConversationService`, served to web-bff over gRPC (h2c): the handlers of each concern
 * (api/conversation/) joined into one service. Every call carries a service credential (the platform's
 * serviceAuthInterceptor); web-bff names the user (`bedrock-user-id`, believed only from web-bff).
 * Someone else's conversation is NOT_FOUND; errors are Connect codes with messages a person can act on.
 */
import type { ConnectRouter } from '@connectrpc/connect';
import { ConversationService, RewindConversationRequestSchema, RewindConversationResponseSchema } from '@bedrock/contracts';
import { serveService } from '@bedrock/platform/server';
import { registerCheckpointApi } from './checkpoint-api.ts';
import { registerWorkspaceApi } from './workspace-api.ts';
import { actorOf, requestKeyOf, userOf } from './request-checks.ts';
import { conversationApi, type ConversationApiOptions } from './conversation/shared.ts';
import { conversationHandlers } from './conversation/conversations.ts';
import { messageHandlers } from './conversation/messages.ts';
import { modeHandlers } from './conversation/modes.ts';
import { forkHandlers } from './conversation/forks.ts';
import { settingsHandlers } from './conversation/settings.ts';

export { userOf };
export type { ConversationApiOptions };

export function registerConversationApi(router: ConnectRouter, options: ConversationApiOptions): void {
  const api = conversationApi(options);

  registerWorkspaceApi(router, {
    workspaces: options.workspaces,
    userOf,
    async deleteConversation(ctx, id) {
      const result = await api.deleteOwned(ctx, id);
      return 'ids' in result ? result.ids : [];
    },
  });

  if (options.checkpoints) {
    registerCheckpointApi(router, {
      checkpoints: options.checkpoints,
      owned: api.owned,
      actorOf,
      requestKeyOf: (user, scope, req) => requestKeyOf(user, scope, 'RewindConversation', RewindConversationRequestSchema, req),
      findRequest: (key) => options.store.findRequest(key),
      replay: (prior, key) => api.replay(prior, key, RewindConversationResponseSchema),
    });
  }

  // A full ServiceImpl: an RPC added to ConversationService and handled by none of these fails to compile here.
  serveService(router, ConversationService, {
    ...conversationHandlers(api),
    ...messageHandlers(api),
    ...modeHandlers(api),
    ...forkHandlers(api),
    ...settingsHandlers(api),
  });
}
