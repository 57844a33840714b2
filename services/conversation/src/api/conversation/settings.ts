/** ConversationService's settings and usage: UpdateConversationSettings and GetUsage (the user's spend and limits). */
import { Code, ConnectError } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { GetUsageResponseSchema, UpdateConversationSettingsResponseSchema } from '@bedrock/contracts';
import { conversationToProto } from '../../mapping/conversation.ts';
import { usageToProto } from '../../spend/limits.ts';
import { notFound, thinkingOf, userOf } from '../request-checks.ts';
import type { ConversationApi, ConversationHandlers } from './shared.ts';

export function settingsHandlers(api: ConversationApi): ConversationHandlers<'updateConversationSettings' | 'getUsage'> {
  const { options, store, policy, now } = api;
  return {
    async getUsage(_req, ctx) {
      if (!options.limits) throw new ConnectError('this service keeps no limits', Code.Unimplemented);
      return create(GetUsageResponseSchema, { usage: usageToProto(await options.limits.usage(userOf(ctx), now())) });
    },

    /** Applies from the next LLM request; nothing is stored when a value is refused. */
    async updateConversationSettings(req, ctx) {
      const record = await api.owned(ctx, req.conversationId);
      const thinking = thinkingOf(req.thinking);
      const serverTools = req.serverTools ? api.serverToolsOf(req.serverTools.tools) : null;
      if (thinking === null && serverTools === null) {
        return create(UpdateConversationSettingsResponseSchema, { conversation: conversationToProto(record, policy) });
      }
      const updated = await store.updateSettings(record.id, {
        ...(thinking !== null ? { thinking } : {}),
        ...(serverTools !== null ? { serverTools } : {}),
      });
      if (!updated) throw notFound(req.conversationId);
      return create(UpdateConversationSettingsResponseSchema, { conversation: conversationToProto(updated, policy) });
    },
  };
}
