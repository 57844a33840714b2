/**
 * ConversationService's ForkConversation: a new conversation of the same user with a copy of
 * a history up to a message (forks.ts decides where a history may end), with or without the
 * source's files. RewindConversation is CheckpointService's (checkpoint-api.ts).
 */
import { randomUUID } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { create, toBinary } from '@bufbuild/protobuf';
import { ForkConversationRequestSchema, ForkConversationResponseSchema } from '@bedrock/contracts';
import { conversationToProto } from '../../mapping/conversation.ts';
import type { ConversationRecord, Snapshot } from '../../store/conversation-store.ts';
import { chooseForkPoint, forkTitle, needsRestrictedNotice, RESTRICTED_NOTICE } from '../../forks.ts';
import { HOST_PATHS_OFF } from '../../workspaces/workspaces.ts';
import { directoryProblem, notFound, requestKeyOf } from '../request-checks.ts';
import type { ConversationApi, ConversationHandlers } from './shared.ts';

/** How many of the source's messages the fork copies (chooseForkPoint's), or the refusal. */
function forkThrough(source: ConversationRecord, snapshot: Snapshot, atMessage: bigint): number {
  const point = chooseForkPoint(snapshot.messages, Number(atMessage));
  switch (point.kind) {
    case 'empty':
      throw new ConnectError(
        `conversation ${source.id} has no messages yet: there is nothing to fork (create a new conversation instead)`,
        Code.FailedPrecondition,
      );
    case 'beyond':
      throw new ConnectError(
        `at_message ${atMessage} is beyond the last message of conversation ${source.id} (${point.last}): give a message sequence from 1 to ${point.last}, or 0 for the whole history`,
        Code.InvalidArgument,
      );
    case 'invalid':
      throw new ConnectError(`cannot fork conversation ${source.id} at message ${atMessage}: ${point.problem}`, Code.InvalidArgument);
    case 'ok':
      return point.through;
  }
}

/**
 * Where the fork works: its source's place (a host path only while host paths are allowed);
 * with files, a workspace of its own holding the source's files as at the fork point (checkpoints.ts).
 */
async function forkWorkspace(
  api: ConversationApi,
  source: ConversationRecord,
  withFiles: boolean,
  through: number,
): Promise<ConversationRecord['workspace']> {
  const { options } = api;
  if (!source.workspace) {
    if (!options.workspaces.hostPaths) throw new ConnectError(HOST_PATHS_OFF, Code.PermissionDenied);
    if (options.checkCwd ?? true) {
      const why = await directoryProblem(source.cwd);
      if (why)
        throw new ConnectError(
          `cannot fork conversation ${source.id}: its working directory ${JSON.stringify(source.cwd)} ${why}, and a fork works in the same directory; restore it first`,
          Code.FailedPrecondition,
        );
    }
  }
  if (!withFiles) return source.workspace;
  if (!options.checkpoints || !source.workspace)
    throw new ConnectError(
      source.workspace
        ? 'this deployment keeps no checkpoints (no workspace storage): fork without files'
        : `conversation ${source.id} runs in a host directory, not a workspace: only conversations in workspaces can be forked with their files`,
      Code.FailedPrecondition,
    );
  const made = await options.checkpoints.forkFiles(source, through);
  return { ...source.workspace, id: made.id, name: made.name, path: made.path };
}

export function forkHandlers(api: ConversationApi): ConversationHandlers<'forkConversation'> {
  const { options, store, applier, policy, now } = api;
  return {
    /**
     * Same cwd, model and settings as the source; its state is a new conversation's (idle,
     * Restricted), from the applier. The source is only read, whatever its state: messages
     * are append-only, so a busy source's finished messages can be copied.
     */
    async forkConversation(req, ctx) {
      const source = await api.owned(ctx, req.conversationId);
      // Scoped to the user, as CreateConversation: the fork is a new conversation.
      const key = requestKeyOf(source.ownerId, '', 'ForkConversation', ForkConversationRequestSchema, req);
      const earlier = key ? await store.findRequest(key) : null;
      if (earlier) return api.replay(earlier, key!, ForkConversationResponseSchema);
      if (source.parentId) {
        throw new ConnectError(
          `conversation ${source.id} is a sub-agent, driven by its parent: fork its parent ${source.parentId} instead`,
          Code.InvalidArgument,
        );
      }
      if (req.atMessage > BigInt(Number.MAX_SAFE_INTEGER))
        throw new ConnectError(`at_message ${req.atMessage} is not a message sequence`, Code.InvalidArgument);
      const snapshot = await store.snapshot(source.id);
      if (!snapshot) throw notFound(source.id);
      const through = forkThrough(source, snapshot, req.atMessage);
      const workspace = await forkWorkspace(api, source, req.withFiles, through);
      const id = randomUUID();
      const input = applier.newConversation({
        id,
        ownerId: source.ownerId,
        slug: `c-${id.slice(0, 8)}`,
        cwd: workspace && source.workspace ? workspace.path + source.cwd.slice(source.workspace.path.length) : source.cwd,
        workspace,
        model: source.model,
        sandboxAvailable: await options.sandboxAvailable(),
        thinking: source.thinking,
        serverTools: source.serverTools,
      });
      const copied = snapshot.messages.slice(0, through);
      const copy = {
        sourceId: source.id,
        through,
        title: forkTitle(source),
        // The copy may end with the model told it is Unrestricted; a fork starts Restricted.
        notice: input.state.mode === 'restricted' && needsRestrictedNotice(copied) ? RESTRICTED_NOTICE : null,
      };
      const stored = (record: ConversationRecord) =>
        create(ForkConversationResponseSchema, { conversation: conversationToProto(record, policy) });
      const respond = async (record: ConversationRecord) =>
        create(ForkConversationResponseSchema, { conversation: await api.full(record) });
      const fork = () =>
        store.fork(
          input,
          copy,
          key ? { key, outcome: (record) => ({ response: toBinary(ForkConversationResponseSchema, stored(record)) }) } : undefined,
        );
      // A fork is one more conversation of the user: it meets their limit on conversations.
      const result = await (options.limits ? options.limits.admitConversation(source.ownerId, now(), fork) : fork());
      return result.kind === 'replayed' ? api.replay(result.prior, key!, ForkConversationResponseSchema) : respond(result.record);
    },
  };
}
