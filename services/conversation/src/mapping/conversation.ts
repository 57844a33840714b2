import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { ConversationSchema, ForkOriginSchema, type Conversation } from '@bedrock/contracts';
import type { Policy } from '../core/index.ts';
import { contextUsageOf } from './effects-to-outbox.ts';
import type { ConversationRecord } from '../store/conversation-store.ts';
import { serverToolToProto, thinkingToProto } from '../settings.ts';
import { modeToProto, stateToProto, usageToProto } from './proto.ts';

export function conversationToProto(record: ConversationRecord, policy: Policy): Conversation {
  return create(ConversationSchema, {
    id: record.id,
    slug: record.slug,
    cwd: record.cwd,
    model: record.model,
    mode: modeToProto(record.state.mode),
    sandboxAvailable: record.sandboxAvailable,
    state: stateToProto(record.state, policy),
    contextUsage: contextUsageOf(record.state, record.contextWindow),
    totalUsage: usageToProto(record.state.totalUsage),
    parentId: record.parentId ?? '',
    userInitiated: record.userInitiated,
    continuedFromId: record.continuedFromId ?? '',
    createdAt: timestampFromDate(record.createdAt),
    updatedAt: timestampFromDate(record.updatedAt),
    archived: record.archived,
    thinking: thinkingToProto(record.thinking),
    serverTools: record.serverTools.map(serverToolToProto),
    title: record.title ?? '',
    costMicros: BigInt(record.costMicros),
    workspaceId: record.workspace?.id ?? '',
    workspaceName: record.workspace?.name ?? '',
    ...(record.forkedFrom
      ? {
          forkedFrom: create(ForkOriginSchema, {
            conversationId: record.forkedFrom.conversationId,
            messageSequence: BigInt(record.forkedFrom.messageSequence),
            sourceDeleted: record.forkedFrom.sourceDeleted,
          }),
        }
      : {}),
  });
}
