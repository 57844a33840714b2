/**
 * `bedrock.v1.CheckpointService`, served to web-bff beside the ConversationService: a
 * conversation's checkpoints, RewindConversation and GetWorkspaceDiff
 * (checkpoints/checkpoints.ts). Another user's conversation is NOT_FOUND.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create, toBinary } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  CheckpointSchema,
  CheckpointService,
  FileChangeKind,
  FileChangeSchema,
  GetWorkspaceDiffResponseSchema,
  ListCheckpointsResponseSchema,
  RewindConversationResponseSchema,
  RewindScope,
} from '@bedrock/contracts';
import type { RewindConversationRequest, RewindConversationResponse } from '@bedrock/contracts';
import type { Checkpoints, RewindScope as Scope } from '../checkpoints/checkpoints.ts';
import type { AuditActor } from '../store/audit-store.ts';
import type { ConversationRecord } from '../store/conversation-store.ts';
import type { PriorOutcome, RequestKey } from '../store/request-outcomes.ts';
import { claimRequest, storeOutcome } from '../store/request-outcomes.ts';
import { serveService } from '@bedrock/platform/server';

export interface CheckpointApiOptions {
  readonly checkpoints: Checkpoints;
  /** The caller's conversation, NOT_FOUND otherwise. */
  readonly owned: (ctx: HandlerContext, id: string) => Promise<ConversationRecord>;
  readonly actorOf: (ctx: HandlerContext) => AuditActor;
  /** The request key of a request with a request id (conversation-api's). */
  readonly requestKeyOf: (user: string, scope: string, req: RewindConversationRequest) => RequestKey | undefined;
  readonly findRequest: (key: RequestKey) => Promise<PriorOutcome | null>;
  readonly replay: (prior: PriorOutcome, key: RequestKey) => Promise<RewindConversationResponse>;
}

const KINDS: Record<string, FileChangeKind> = {
  added: FileChangeKind.ADDED,
  modified: FileChangeKind.MODIFIED,
  deleted: FileChangeKind.DELETED,
  mode: FileChangeKind.MODE,
  symlink: FileChangeKind.SYMLINK,
};

function scopeOf(scope: RewindScope): Scope {
  switch (scope) {
    case RewindScope.FILES:
      return 'files';
    case RewindScope.HISTORY:
      return 'history';
    case RewindScope.BOTH:
    case RewindScope.UNSPECIFIED:
      return 'both';
    default:
      throw new ConnectError(`scope ${String(scope)} is not one of BOTH, FILES, HISTORY`, Code.InvalidArgument);
  }
}

function sequence(value: bigint, field: string): number {
  if (value > BigInt(Number.MAX_SAFE_INTEGER)) throw new ConnectError(`${field} ${value} is not a message sequence`, Code.InvalidArgument);
  return Number(value);
}

export function registerCheckpointApi(router: ConnectRouter, options: CheckpointApiOptions): void {
  const { checkpoints, owned } = options;
  serveService(router, CheckpointService, {
    async listCheckpoints(req, ctx) {
      const record = await owned(ctx, req.conversationId);
      const rows = await checkpoints.list(record);
      return create(ListCheckpointsResponseSchema, {
        checkpoints: rows.map((r) => create(CheckpointSchema, { turnMessage: BigInt(r.turn), createdAt: timestampFromDate(r.createdAt) })),
      });
    },

    async rewindConversation(req, ctx) {
      const record = await owned(ctx, req.conversationId);
      const key = options.requestKeyOf(record.ownerId, record.id, req);
      const earlier = key ? await options.findRequest(key) : null;
      if (earlier) return options.replay(earlier, key!);
      const respond = (o: { filesFromTurn: number; messagesRemoved: number }) =>
        create(RewindConversationResponseSchema, { filesFromTurn: BigInt(o.filesFromTurn), messagesRemoved: o.messagesRemoved });
      let replayed: PriorOutcome | null = null;
      const outcome = await checkpoints.rewind(
        record,
        sequence(req.atMessage, 'at_message'),
        scopeOf(req.scope),
        options.actorOf(ctx),
        key
          ? async (client, result) => {
              replayed = await claimRequest(client, key);
              if (!replayed) await storeOutcome(client, key, { response: toBinary(RewindConversationResponseSchema, respond(result)) });
            }
          : undefined,
      );
      if (replayed) return options.replay(replayed, key!);
      return respond(outcome);
    },

    async getWorkspaceDiff(req, ctx) {
      const record = await owned(ctx, req.conversationId);
      const diff = await checkpoints.diff(record, sequence(req.from, 'from'), sequence(req.to, 'to'));
      return create(GetWorkspaceDiffResponseSchema, {
        complete: diff.complete,
        changes: diff.changes.map((c) =>
          create(FileChangeSchema, {
            path: c.path,
            kind: KINDS[c.kind] ?? FileChangeKind.UNSPECIFIED,
            type: c.type,
            oldMode: c.oldMode,
            newMode: c.newMode,
            unifiedDiff: c.unifiedDiff,
            binary: c.binary,
          }),
        ),
      });
    },
  });
}
