/** ConversationService's modes: the user's answer to a mode upgrade the agent asked for, and DowngradeMode. */
import { create } from '@bufbuild/protobuf';
import {
  DowngradeModeRequestSchema,
  DowngradeModeResponseSchema,
  RespondToModeUpgradeRequestSchema,
  RespondToModeUpgradeResponseSchema,
} from '@bedrock/contracts';
import { conversationToProto } from '../../mapping/conversation.ts';
import type { ConversationApi, ConversationHandlers } from './shared.ts';
import { act } from './user-actions.ts';

export function modeHandlers(api: ConversationApi): ConversationHandlers<'respondToModeUpgrade' | 'downgradeMode'> {
  const { policy } = api;
  return {
    respondToModeUpgrade: (req, ctx) =>
      act(api, ctx, {
        method: 'RespondToModeUpgrade',
        conversationId: req.conversationId,
        requestSchema: RespondToModeUpgradeRequestSchema,
        request: req,
        responseSchema: RespondToModeUpgradeResponseSchema,
        eventType: req.approve ? 'user_approve_upgrade' : 'user_deny_upgrade',
        event: () => ({ type: req.approve ? 'user_approve_upgrade' : 'user_deny_upgrade' }),
        respond: (result) => create(RespondToModeUpgradeResponseSchema, { conversation: conversationToProto(result.record, policy) }),
      }),

    downgradeMode: (req, ctx) =>
      act(api, ctx, {
        method: 'DowngradeMode',
        conversationId: req.conversationId,
        requestSchema: DowngradeModeRequestSchema,
        request: req,
        responseSchema: DowngradeModeResponseSchema,
        eventType: 'user_request_downgrade',
        event: () => ({ type: 'user_request_downgrade' }),
        respond: (result) => create(DowngradeModeResponseSchema, { conversation: conversationToProto(result.record, policy) }),
      }),
  };
}
