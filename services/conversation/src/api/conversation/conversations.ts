/**
 * ConversationService's conversations themselves: CreateConversation, ListConversations,
 * GetConversation, RenameConversation, DeleteConversation and WatchConversation.
 */
import { randomUUID } from 'node:crypto';
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import { create, toBinary } from '@bufbuild/protobuf';
import {
  CreateConversationRequestSchema,
  CreateConversationResponseSchema,
  DeleteConversationRequestSchema,
  DeleteConversationResponseSchema,
  GetConversationResponseSchema,
  ListConversationsResponseSchema,
  RenameConversationResponseSchema,
  type CreateConversationRequest,
  type ListConversationsRequest,
} from '@bedrock/contracts';
import { watchConversation } from '@bedrock/platform/watch';
import { conversationToProto } from '../../mapping/conversation.ts';
import { messageToProto } from '../../mapping/proto.ts';
import { InvalidCursorError, type ConversationRecord } from '../../store/conversation-store.ts';
import { checkTitle, MAX_TITLE_CHARS } from '../../titles.ts';
import type { Placement } from '../../workspaces/workspaces.ts';
import { LIMITS } from '../input-limits.ts';
import { MODEL_PATTERN, notFound, requestKeyOf, requireDirectory, requireId, thinkingOf, userOf } from '../request-checks.ts';
import type { ConversationApi, ConversationHandlers } from './shared.ts';

/**
 * Where CreateConversation's workspace and cwd put the conversation: a workspace of the
 * caller (workspaces.ts), or, where host paths are allowed, an absolute host path that must be
 * a directory this service can see. A refused host path is refused before it is looked at.
 */
async function placeConversation(api: ConversationApi, user: string, workspace: string, cwd: string): Promise<Placement> {
  const given = cwd.trim();
  if (given.length > LIMITS.maxCwdChars)
    throw new ConnectError(`cwd is too long (at most ${LIMITS.maxCwdChars} characters)`, Code.InvalidArgument);
  const placed = await api.options.workspaces.place(user, workspace, given);
  if (!placed.workspace && (api.options.checkCwd ?? true)) await requireDirectory(placed.cwd);
  return placed;
}

/** The model CreateConversation asks for (or the default), refused unless well formed and known. */
async function modelOf(api: ConversationApi, user: string, req: CreateConversationRequest): Promise<string> {
  const { options, store } = api;
  const model = req.model.trim() || options.defaultModel;
  if (!MODEL_PATTERN.test(model)) throw new ConnectError(`model ${JSON.stringify(model)} is not a valid model id`, Code.InvalidArgument);
  // An unknown model would be shown while another one answers (or every request fail): refused
  // here, naming the ones that work. A continuation may keep its source's model.
  if (options.models && model !== options.defaultModel && !options.models.lookup(model).known) {
    const source = req.continueFromId ? await store.get(req.continueFromId) : null;
    if (!source || source.ownerId !== user || source.model !== model) {
      const known = [...new Set([options.defaultModel, ...options.models.list().map((m) => m.id)])].sort();
      throw new ConnectError(
        `model ${JSON.stringify(model)} is not one this service knows: use one of ${known.join(', ')} (or leave it out for ${options.defaultModel})`,
        Code.InvalidArgument,
      );
    }
  }
  return model;
}

/** The summary a continuation starts from: its source's, which must be context-exhausted. */
async function continuationSeed(api: ConversationApi, user: string, fromId: string): Promise<{ summary: string } | undefined> {
  if (!fromId) return undefined;
  const from = await api.store.get(fromId);
  if (!from || from.ownerId !== user) throw notFound(fromId);
  if (from.state.phase.kind !== 'context_exhausted') {
    throw new ConnectError(`conversation ${fromId} has no continuation summary yet (it is not context-exhausted)`, Code.FailedPrecondition);
  }
  return { summary: from.state.phase.summary };
}

async function createConversation(api: ConversationApi, req: CreateConversationRequest, ctx: HandlerContext) {
  const { options, store, applier, policy, now } = api;
  const user = userOf(ctx);
  // Scoped to the user alone: there is no conversation yet.
  const key = requestKeyOf(user, '', 'CreateConversation', CreateConversationRequestSchema, req);
  const earlier = key ? await store.findRequest(key) : null;
  if (earlier) return api.replay(earlier, key!, CreateConversationResponseSchema);
  const placed = await placeConversation(api, user, req.workspace, req.cwd);
  const model = await modelOf(api, user, req);
  const thinking = thinkingOf(req.thinking) ?? options.defaultThinking ?? 'high';
  const serverTools = api.serverToolsOf(req.serverTools);
  const seed = await continuationSeed(api, user, req.continueFromId);
  const id = randomUUID();
  const input = applier.newConversation({
    id,
    ownerId: user,
    slug: `c-${id.slice(0, 8)}`,
    cwd: placed.cwd,
    workspace: placed.workspace,
    model,
    sandboxAvailable: await options.sandboxAvailable(),
    continuedFromId: req.continueFromId || null,
    thinking,
    serverTools,
  });
  // The stored answer (replayed to a retry) goes without the write access, which is read live.
  const stored = (record: ConversationRecord) =>
    create(CreateConversationResponseSchema, { conversation: conversationToProto(record, policy) });
  const respond = async (record: ConversationRecord) => create(CreateConversationResponseSchema, { conversation: await api.full(record) });
  const admit = <T>(create: () => Promise<T>) => (options.limits ? options.limits.admitConversation(user, now(), create) : create());
  if (!key) return respond(await admit(() => store.create(input, seed)));
  const result = await admit(() =>
    store.createRequest(input, seed, {
      key,
      outcome: (record) => ({ response: toBinary(CreateConversationResponseSchema, stored(record)) }),
    }),
  );
  // The same request in flight at the same time (another replica) created it: answer with that one.
  return result.kind === 'replayed' ? api.replay(result.prior, key, CreateConversationResponseSchema) : respond(result.record);
}

async function listConversations(api: ConversationApi, req: ListConversationsRequest, ctx: HandlerContext) {
  const { store, policy } = api;
  const user = userOf(ctx);
  const limit = req.pageSize === 0 ? LIMITS.defaultPageSize : Math.min(req.pageSize, LIMITS.maxPageSize);
  const query = req.query.trim();
  if (Array.from(query).length > MAX_TITLE_CHARS)
    throw new ConnectError(
      `query is ${Array.from(query).length} characters; titles have at most ${MAX_TITLE_CHARS}, so search for a part of one`,
      Code.InvalidArgument,
    );
  if (req.parentId) {
    const parent = await store.get(req.parentId);
    if (!parent || parent.ownerId !== user) throw notFound(req.parentId);
  }
  try {
    const page = await store.list({
      ownerId: user,
      limit,
      ...(req.parentId ? { parentId: req.parentId } : {}),
      ...(req.pageToken ? { after: req.pageToken } : {}),
      ...(query ? { query } : {}),
      includeArchived: req.includeArchived,
    });
    return create(ListConversationsResponseSchema, {
      conversations: page.records.map((r) => conversationToProto(r, policy)),
      nextPageToken: page.next ?? '',
    });
  } catch (err) {
    if (err instanceof InvalidCursorError) throw new ConnectError(err.message, Code.InvalidArgument);
    throw err;
  }
}

export function conversationHandlers(
  api: ConversationApi,
): ConversationHandlers<
  'createConversation' | 'listConversations' | 'getConversation' | 'renameConversation' | 'deleteConversation' | 'watchConversation'
> {
  const { options, store, applier, policy } = api;
  return {
    createConversation: (req, ctx) => createConversation(api, req, ctx),

    listConversations: (req, ctx) => listConversations(api, req, ctx),

    async getConversation(req, ctx) {
      await api.owned(ctx, req.conversationId);
      const snapshot = await store.snapshot(req.conversationId, LIMITS.subAgentsShown);
      if (!snapshot) throw notFound(req.conversationId);
      return create(GetConversationResponseSchema, {
        conversation: await api.full(snapshot.record),
        messages: snapshot.messages.map(messageToProto),
        sequence: BigInt(snapshot.record.notifySeq),
        subAgents: snapshot.subAgents.map((r) => conversationToProto(r, policy)),
        moreSubAgents: snapshot.moreSubAgents,
      });
    },

    /** The owner's title; the automatic one never replaces it. Watchers get `title_changed`. */
    async renameConversation(req, ctx) {
      const record = await api.owned(ctx, req.conversationId);
      const checked = checkTitle(req.title);
      if ('problem' in checked) throw new ConnectError(checked.problem, Code.InvalidArgument);
      const renamed = await applier.rename(record.id, checked.title);
      if (!renamed) throw notFound(req.conversationId);
      return create(RenameConversationResponseSchema, { conversation: conversationToProto(renamed, policy) });
    },

    /**
     * Deletes the conversation and its sub-agents (store.deleteTree: one transaction), refused
     * while any of them is busy. Then, after the commit, each gets a final `deleted` event in
     * its notification stream, and the streams are deleted `deletedStreamGraceMs` later (a crash
     * in between leaves keys that expire by their TTL).
     */
    async deleteConversation(req, ctx) {
      const user = userOf(ctx);
      const id = requireId(req.conversationId);
      // Scoped to the user, as ForkConversation: the conversation's own scope is deleted with it.
      const key = requestKeyOf(user, '', 'DeleteConversation', DeleteConversationRequestSchema, req);
      const earlier = key ? await store.findRequest(key) : null;
      if (earlier) return api.replay(earlier, key!, DeleteConversationResponseSchema);
      const respond = (ids: readonly string[]) => create(DeleteConversationResponseSchema, { deletedIds: [...ids] });
      const result = await api.deleteOwned(
        ctx,
        id,
        key ? { key, outcome: ({ ids }) => ({ response: toBinary(DeleteConversationResponseSchema, respond(ids)) }) } : undefined,
      );
      return 'prior' in result ? api.replay(result.prior, key!, DeleteConversationResponseSchema) : respond(result.ids);
    },

    async *watchConversation(req, ctx) {
      await api.owned(ctx, req.conversationId);
      yield* watchConversation({
        conversationId: req.conversationId,
        after: { sequence: req.afterSequence, deltaIndex: req.afterDeltaIndex },
        streams: options.streams,
        snapshot: async () => {
          const s = await store.snapshot(req.conversationId, LIMITS.subAgentsShown);
          if (!s) throw notFound(req.conversationId);
          return {
            conversation: await api.full(s.record),
            messages: s.messages.map(messageToProto),
            sequence: BigInt(s.record.notifySeq),
            subAgents: s.subAgents.map((r) => conversationToProto(r, policy)),
          };
        },
        heartbeatMs: options.heartbeatMs ?? 15_000,
        signal: ctx.signal,
      });
    },
  };
}
