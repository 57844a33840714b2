/**
 * The internal API: `bedrock.v1.ConversationService`, served to web-bff over gRPC (h2c).
 * Every call carries a service credential (checked by the platform's serviceAuthInterceptor);
 * web-bff authenticates the user and names them in the `bedrock-user-id` header, believed only
 * from web-bff. This service enforces ownership (someone else's conversation is NOT_FOUND)
 * and validates input.
 * Errors are Connect codes with messages a person can act on; internal detail stays in logs.
 */
import { randomUUID } from 'node:crypto';
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create, fromBinary, toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import {
  CancelQueuedMessageRequestSchema,
  CancelQueuedMessageResponseSchema,
  CancelRequestSchema,
  CancelResponseSchema,
  ConversationService,
  CreateConversationRequestSchema,
  CreateConversationResponseSchema,
  DeleteConversationRequestSchema,
  DeleteConversationResponseSchema,
  DowngradeModeRequestSchema,
  DowngradeModeResponseSchema,
  ForkConversationRequestSchema,
  ForkConversationResponseSchema,
  GetConversationResponseSchema,
  ListConversationsResponseSchema,
  RenameConversationResponseSchema,
  RespondToModeUpgradeRequestSchema,
  RespondToModeUpgradeResponseSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  TriggerContinuationRequestSchema,
  TriggerContinuationResponseSchema,
  UpdateConversationSettingsResponseSchema,
  type Message,
  type WriteAccess,
  rejectionError,
  GetUsageResponseSchema,
  RewindConversationRequestSchema,
  RewindConversationResponseSchema,
  isResting,
} from '@bedrock/contracts';
import type { NotificationStreams } from '@bedrock/platform';
import { serveService, inSpan, type Logger } from '@bedrock/platform/server';
import { pendingMessageId, type ConversationEvent, type Policy } from '../core/index.ts';
import { conversationToProto } from '../mapping/conversation.ts';
import { deliveryFromProto, messageToProto, stateToProto } from '../mapping/proto.ts';
import type { Applier, ApplyResult } from '../apply/applier.ts';
import { InvalidCursorError, type ConversationRecord, type ConversationStore } from '../store/conversation-store.ts';
import { type PriorOutcome, type RequestKey, type RequestRecorder, type StoredOutcome } from '../store/request-outcomes.ts';
import { resolveServerTools, SettingsError, type ServerToolName, type ThinkingSetting } from '../settings.ts';
import { checkTitle, MAX_TITLE_CHARS } from '../titles.ts';
import type { Checkpoints } from '../checkpoints/checkpoints.ts';
import { registerCheckpointApi } from './checkpoint-api.ts';
import { chooseForkPoint, forkTitle, needsRestrictedNotice, RESTRICTED_NOTICE } from '../forks.ts';
import type { ModelRegistry } from '@bedrock/contracts/models';
import { LIMITS } from './input-limits.ts';
import { usageToProto, type LimitsStore } from '../spend/limits.ts';
import { invokeAgentAttributes, turnTraceContext } from './turn-trace.ts';
import { createdConversationIdOf, endDeletedStreams, type ConversationLeftovers } from './deleted-streams.ts';
import { watchConversation } from '@bedrock/platform/watch';
import { HOST_PATHS_OFF, type Placement, type Workspaces } from '../workspaces/workspaces.ts';
import { registerWorkspaceApi } from './workspace-api.ts';
import {
  actorOf,
  directoryProblem,
  MODEL_PATTERN,
  notFound,
  rejectedError,
  requestKeyOf,
  requireDirectory,
  requireId,
  thinkingOf,
  userOf,
  validateImages,
  type Settled,
} from './request-checks.ts';

export { userOf };

export interface ConversationApiOptions {
  readonly store: ConversationStore;
  /** Applies user actions (and publishes their effects before the call is answered). */
  readonly applier: Applier;
  readonly streams: NotificationStreams;
  readonly logger: Logger;
  readonly policy: Policy;
  /** Model for conversations created without one. */
  readonly defaultModel: string;
  /**
   * The models this deployment knows (BEDROCK_MODELS over the built-in table): a conversation is
   * created only with one of them or the default model. Unset: any well-formed id is taken.
   */
  readonly models?: ModelRegistry;
  /** Thinking level of conversations created without one (BEDROCK_DEFAULT_THINKING). Default high. */
  readonly defaultThinking?: ThinkingSetting;
  /** Server tools conversations may turn on (BEDROCK_SERVER_TOOLS). Default none. */
  readonly allowedServerTools?: readonly ServerToolName[];
  /** Whether a sandbox-capable tool-runner exists now (decides Restricted mode for new conversations). */
  readonly sandboxAvailable: () => Promise<boolean>;
  /** Called after each user action with the phase it found, the event type and the outcome (metrics). */
  readonly onApplied?: (from: string, event: string, outcome: string) => void;
  /** Per-user limits SendMessage meets (spend/limits.ts); absent: none. */
  readonly limits?: LimitsStore;
  /** The clock of spend and limit periods; default the system clock. */
  readonly now?: () => Date;
  /** Heartbeat interval of watch streams, ms. Default 15000. */
  readonly heartbeatMs?: number;
  /**
   * After DeleteConversation commits, how long watchers have to read the final `deleted` event
   * before the notification streams are deleted, ms. Default 1000.
   */
  readonly deletedStreamGraceMs?: number;
  /** Pixels all the images of one message may have together (BEDROCK_IMAGE_PIXELS_PER_MESSAGE). Default 100,000,000. */
  readonly imagePixelsPerMessage?: number;
  /** The transport's queues and run ledger: a deleted conversation's jobs and tool results are removed from them. */
  readonly leftovers?: ConversationLeftovers;
  /** Refuse CreateConversation whose cwd is not a directory on this host (BEDROCK_CHECK_CWD). Default true. */
  readonly checkCwd?: boolean;
  /** Users' workspaces (WorkspaceService), and whether host paths are allowed. */
  readonly workspaces: Workspaces;
  /** Checkpoints of conversations' workspaces (CheckpointService, forks with files); absent: none. */
  readonly checkpoints?: Checkpoints;
  /**
   * Where a conversation's Unrestricted tools may write and whether they can, as a tool-runner
   * finds it (docs/workspaces.md, "Write access"); undefined when no runner answered. Absent: not
   * reported.
   */
  readonly writeAccess?: (record: ConversationRecord) => Promise<WriteAccess | undefined>;
}

export function registerConversationApi(router: ConnectRouter, options: ConversationApiOptions): void {
  /** One conversation as a client reads it alone: with its write access (lists go without). */
  const full = async (record: ConversationRecord) => {
    const proto = conversationToProto(record, options.policy);
    const access = options.writeAccess ? await options.writeAccess(record) : undefined;
    if (access) proto.writeAccess = access;
    return proto;
  };
  const { store, applier, policy } = options;
  const now = options.now ?? (() => new Date());
  const hostPaths = options.workspaces.hostPaths;

  /**
   * Where CreateConversation's workspace and cwd put the conversation: a workspace of the
   * caller (workspaces.ts), or, where host paths are allowed, an absolute host path that must be
   * a directory this service can see. A refused host path is refused before it is looked at.
   */
  async function placeConversation(user: string, workspace: string, cwd: string): Promise<Placement> {
    const given = cwd.trim();
    if (given.length > LIMITS.maxCwdChars)
      throw new ConnectError(`cwd is too long (at most ${LIMITS.maxCwdChars} characters)`, Code.InvalidArgument);
    const placed = await options.workspaces.place(user, workspace, given);
    if (!placed.workspace && (options.checkCwd ?? true)) await requireDirectory(placed.cwd);
    return placed;
  }

  const endStreams = (ids: readonly string[], notifySeqs: ReadonlyMap<string, number>) =>
    endDeletedStreams(
      {
        streams: options.streams,
        ...(options.leftovers ? { leftovers: options.leftovers } : {}),
        logger: options.logger,
        ...(options.deletedStreamGraceMs !== undefined ? { graceMs: options.deletedStreamGraceMs } : {}),
      },
      ids,
      notifySeqs,
    );
  const allowedServerTools = options.allowedServerTools ?? [];

  /** The server tools asked for, each allowed by the deployment; else INVALID_ARGUMENT naming BEDROCK_SERVER_TOOLS. */
  function serverToolsOf(requested: Parameters<typeof resolveServerTools>[0]): ServerToolName[] {
    try {
      return resolveServerTools(requested, allowedServerTools);
    } catch (err) {
      if (err instanceof SettingsError) throw new ConnectError(err.message, Code.InvalidArgument);
      throw err;
    }
  }

  /**
   * Deletes a user's conversation tree (DeleteConversation, and a workspace deleted with its
   * conversations): the ids deleted, a replayed outcome, or the refusal as a ConnectError.
   */
  async function deleteOwned(
    ctx: HandlerContext,
    id: string,
    request?: RequestRecorder<{ ids: readonly string[] }>,
  ): Promise<{ ids: readonly string[] } | { prior: PriorOutcome }> {
    const result = await store.deleteTree(id, userOf(ctx), createdConversationIdOf, request, actorOf(ctx));
    switch (result.kind) {
      case 'replayed':
        return { prior: result.prior };
      case 'not_found':
        throw notFound(id);
      case 'sub_agent':
        throw new ConnectError(
          `conversation ${id} is a sub-agent, driven by its parent: delete its parent ${result.parentId} instead (its sub-agents go with it)`,
          Code.InvalidArgument,
        );
      case 'busy': {
        const self = result.busy.find((r) => r.id === id);
        const what = self
          ? `conversation ${id} is busy (${self.state.phase.kind.replaceAll('_', ' ')})`
          : `conversation ${id} has a busy sub-agent (${result.busy[0]!.id}: ${result.busy[0]!.state.phase.kind.replaceAll('_', ' ')})`;
        throw rejectionError({
          code: 'conversation_busy',
          message: `${what}: cancel it first (Cancel, or bedrock cancel ${id}), then delete it.`,
        });
      }
      case 'deleted':
        await endStreams(result.ids, result.notifySeqs);
        await options.checkpoints?.forget(result.ids);
        options.logger.info({ conversation_id: id, deleted: result.ids.length }, 'conversation deleted');
        return { ids: result.ids };
    }
  }

  registerWorkspaceApi(router, {
    workspaces: options.workspaces,
    userOf,
    async deleteConversation(ctx, id) {
      const result = await deleteOwned(ctx, id);
      return 'ids' in result ? result.ids : [];
    },
  });

  async function owned(ctx: HandlerContext, id: string): Promise<ConversationRecord> {
    const user = userOf(ctx);
    const record = await store.get(requireId(id));
    if (!record || record.ownerId !== user) throw notFound(id);
    return record;
  }

  if (options.checkpoints) {
    registerCheckpointApi(router, {
      checkpoints: options.checkpoints,
      owned,
      actorOf,
      requestKeyOf: (user, scope, req) => requestKeyOf(user, scope, 'RewindConversation', RewindConversationRequestSchema, req),
      findRequest: (key) => store.findRequest(key),
      replay: (prior, key) => replay(prior, key, RewindConversationResponseSchema),
    });
  }

  /**
   * Answers a request whose id was used before with its first outcome (the same response or
   * the same error); a different body under the same id is INVALID_ARGUMENT.
   */
  async function replay<S extends DescMessage>(prior: PriorOutcome, key: RequestKey, schema: S): Promise<MessageShape<S>> {
    if (!prior.sameRequest) {
      const what = key.method === 'SendMessage' && prior.method === 'SendMessage' ? 'message' : 'request';
      const other = prior.method === key.method ? '' : ` (it was used for ${prior.method})`;
      throw new ConnectError(
        `request id ${JSON.stringify(key.requestId)} reused for a different ${what}${other}: a retry must repeat the request exactly; use a new request id for a new ${what}`,
        Code.InvalidArgument,
      );
    }
    const { error, response, messageId } = prior.outcome;
    if (error)
      throw error.rejection
        ? rejectionError({ code: error.rejection, message: error.message }, error.code as Code)
        : new ConnectError(error.message, error.code as Code);
    if (!response) throw new Error(`request ${key.requestId} has a stored row without an outcome`);
    const answer = fromBinary(schema, response);
    if (messageId) {
      const message = await store.message(messageId);
      if (message) (answer as { message?: Message }).message = messageToProto(message);
    }
    return answer;
  }

  /** What is stored for a request id: the refusal, or the response (SendMessage's without the message, kept by id). */
  function outcomeOf<S extends DescMessage>(
    result: ApplyResult,
    schema: S,
    respond: (result: Settled) => MessageShape<S>,
  ): StoredOutcome | null {
    switch (result.kind) {
      case 'not_found':
        return null;
      case 'rejected': {
        const err = rejectedError(result);
        return { error: { code: err.code, message: err.rawMessage, rejection: result.rejection.code } };
      }
      case 'applied':
      case 'noop': {
        const response = respond(result) as MessageShape<S> & { message?: Message };
        if (!response.message) return { response: toBinary(schema, response) };
        return { response: toBinary(schema, { ...response, message: undefined }), messageId: response.message.id };
      }
    }
  }

  interface UserAction<Q extends DescMessage, S extends DescMessage> {
    readonly method: string;
    readonly conversationId: string;
    readonly requestSchema: Q;
    readonly request: MessageShape<Q> & { requestId: string };
    readonly responseSchema: S;
    readonly eventType: ConversationEvent['type'];
    /** The event to apply; validation that throws goes here (skipped when a retry is answered from its first outcome). */
    readonly event: () => ConversationEvent | Promise<ConversationEvent>;
    /** Expensive validation (decoding images), run only once the call is admitted by the user's limits. */
    readonly admitted?: () => Promise<void>;
    readonly respond: (result: Settled) => MessageShape<S>;
  }

  /**
   * Applies a user action; a rejection becomes FAILED_PRECONDITION with the state machine's
   * words. With a request id, the outcome is stored in the same transaction and a retry is
   * answered from it (request-outcomes.ts).
   */
  async function act<Q extends DescMessage, S extends DescMessage>(
    ctx: HandlerContext,
    action: UserAction<Q, S>,
  ): Promise<MessageShape<S>> {
    const id = action.conversationId;
    const { ownerId, state: current } = await owned(ctx, id);
    const key = requestKeyOf(ownerId, id, action.method, action.requestSchema, action.request);
    const replayed = async (prior: PriorOutcome) => {
      options.onApplied?.('none', action.eventType, 'replayed');
      return replay(prior, key!, action.responseSchema);
    };
    // A retry of a request already answered skips validation (images are decoded only once).
    const earlier = key ? await store.findRequest(key) : null;
    if (earlier) return replayed(earlier);
    const event = await action.event();
    const actor = actorOf(ctx);
    const apply = async () => {
      // One user turn is one trace: the active span's, the caller's traceparent (web-bff forwards it) or a new one.
      const trace = turnTraceContext(ctx.requestHeader);
      return key
        ? await applier.applyRequest(id, event, trace, { key, outcome: (r) => outcomeOf(r, action.responseSchema, action.respond) }, actor)
        : await applier.apply(id, event, trace, actor);
    };
    // A user message starts the agent: the turn's `invoke_agent` span (GenAI conventions) parents its jobs.
    // It, and a continuation (a summary request), meets the user's limits first; to a conversation at
    // rest it starts a turn (one more busy). Expensive validation runs only once admitted.
    const limits = options.limits;
    const admittedThenApply = action.admitted ? async () => (await action.admitted!(), apply()) : apply;
    const startsWork = event.type === 'user_message' || event.type === 'user_trigger_continuation';
    const send =
      limits && startsWork
        ? () => limits.admitMessage(ownerId, isResting(current.phase.kind), now(), admittedThenApply)
        : admittedThenApply;
    const result =
      event.type === 'user_message' ? await inSpan('invoke_agent', { attributes: invokeAgentAttributes(id) }, send) : await send();
    // A duplicate that was in flight at the same time (another replica): the first one's outcome.
    if (result.kind === 'replayed') return replayed(result.prior);
    options.onApplied?.(result.kind === 'not_found' ? 'none' : result.from, event.type, result.kind);
    switch (result.kind) {
      case 'not_found':
        throw notFound(id);
      case 'rejected':
        throw rejectedError(result);
      case 'applied':
        // The applier published the effects already: a cancel reaches the worker before the answer.
        return action.respond(result);
      case 'noop':
        return action.respond(result);
    }
  }

  serveService(router, ConversationService, {
    async getUsage(_req, ctx) {
      if (!options.limits) throw new ConnectError('this service keeps no limits', Code.Unimplemented);
      return create(GetUsageResponseSchema, { usage: usageToProto(await options.limits.usage(userOf(ctx), now())) });
    },

    async createConversation(req, ctx) {
      const user = userOf(ctx);
      // Scoped to the user alone: there is no conversation yet.
      const key = requestKeyOf(user, '', 'CreateConversation', CreateConversationRequestSchema, req);
      const earlier = key ? await store.findRequest(key) : null;
      if (earlier) return replay(earlier, key!, CreateConversationResponseSchema);
      const placed = await placeConversation(user, req.workspace, req.cwd);
      const model = req.model.trim() || options.defaultModel;
      if (!MODEL_PATTERN.test(model))
        throw new ConnectError(`model ${JSON.stringify(model)} is not a valid model id`, Code.InvalidArgument);
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
      const thinking = thinkingOf(req.thinking) ?? options.defaultThinking ?? 'high';
      const serverTools = serverToolsOf(req.serverTools);
      let seed: { summary: string } | undefined;
      if (req.continueFromId) {
        const from = await store.get(req.continueFromId);
        if (!from || from.ownerId !== user) throw notFound(req.continueFromId);
        if (from.state.phase.kind !== 'context_exhausted') {
          throw new ConnectError(
            `conversation ${req.continueFromId} has no continuation summary yet (it is not context-exhausted)`,
            Code.FailedPrecondition,
          );
        }
        seed = { summary: from.state.phase.summary };
      }
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
      const respond = async (record: ConversationRecord) => create(CreateConversationResponseSchema, { conversation: await full(record) });
      const admit = <T>(create: () => Promise<T>) => (options.limits ? options.limits.admitConversation(user, now(), create) : create());
      if (!key) return respond(await admit(() => store.create(input, seed)));
      const result = await admit(() =>
        store.createRequest(input, seed, {
          key,
          outcome: (record) => ({ response: toBinary(CreateConversationResponseSchema, stored(record)) }),
        }),
      );
      // The same request in flight at the same time (another replica) created it: answer with that one.
      return result.kind === 'replayed' ? replay(result.prior, key, CreateConversationResponseSchema) : respond(result.record);
    },

    async listConversations(req, ctx) {
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
    },

    async getConversation(req, ctx) {
      await owned(ctx, req.conversationId);
      const snapshot = await store.snapshot(req.conversationId, LIMITS.subAgentsShown);
      if (!snapshot) throw notFound(req.conversationId);
      return create(GetConversationResponseSchema, {
        conversation: await full(snapshot.record),
        messages: snapshot.messages.map(messageToProto),
        sequence: BigInt(snapshot.record.notifySeq),
        subAgents: snapshot.subAgents.map((r) => conversationToProto(r, policy)),
        moreSubAgents: snapshot.moreSubAgents,
      });
    },

    /** The owner's title; the automatic one never replaces it. Watchers get `title_changed`. */
    async renameConversation(req, ctx) {
      const record = await owned(ctx, req.conversationId);
      const checked = checkTitle(req.title);
      if ('problem' in checked) throw new ConnectError(checked.problem, Code.InvalidArgument);
      const renamed = await applier.rename(record.id, checked.title);
      if (!renamed) throw notFound(req.conversationId);
      return create(RenameConversationResponseSchema, { conversation: conversationToProto(renamed, policy) });
    },

    /**
     * A new conversation of the same user with a copy of the history up to a message (forks.ts
     * decides where a history may end): same cwd, model and settings; its state is a new
     * conversation's (idle, Restricted), from the applier. The source is only read, whatever
     * its state: messages are append-only, so a busy source's finished messages can be copied.
     */
    async forkConversation(req, ctx) {
      const source = await owned(ctx, req.conversationId);
      // Scoped to the user, as CreateConversation: the fork is a new conversation.
      const key = requestKeyOf(source.ownerId, '', 'ForkConversation', ForkConversationRequestSchema, req);
      const earlier = key ? await store.findRequest(key) : null;
      if (earlier) return replay(earlier, key!, ForkConversationResponseSchema);
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
      const point = chooseForkPoint(snapshot.messages, Number(req.atMessage));
      switch (point.kind) {
        case 'empty':
          throw new ConnectError(
            `conversation ${source.id} has no messages yet: there is nothing to fork (create a new conversation instead)`,
            Code.FailedPrecondition,
          );
        case 'beyond':
          throw new ConnectError(
            `at_message ${req.atMessage} is beyond the last message of conversation ${source.id} (${point.last}): give a message sequence from 1 to ${point.last}, or 0 for the whole history`,
            Code.InvalidArgument,
          );
        case 'invalid':
          throw new ConnectError(
            `cannot fork conversation ${source.id} at message ${req.atMessage}: ${point.problem}`,
            Code.InvalidArgument,
          );
        case 'ok':
          break;
      }
      // A fork works in its source's place; a host path only while host paths are allowed.
      if (!source.workspace) {
        if (!hostPaths) throw new ConnectError(HOST_PATHS_OFF, Code.PermissionDenied);
        if (options.checkCwd ?? true) {
          const why = await directoryProblem(source.cwd);
          if (why)
            throw new ConnectError(
              `cannot fork conversation ${source.id}: its working directory ${JSON.stringify(source.cwd)} ${why}, and a fork works in the same directory; restore it first`,
              Code.FailedPrecondition,
            );
        }
      }
      // With files: a workspace of its own, the source's files as at the fork point (checkpoints.ts).
      let workspace = source.workspace;
      if (req.withFiles) {
        if (!options.checkpoints || !source.workspace)
          throw new ConnectError(
            source.workspace
              ? 'this deployment keeps no checkpoints (no workspace storage): fork without files'
              : `conversation ${source.id} runs in a host directory, not a workspace: only conversations in workspaces can be forked with their files`,
            Code.FailedPrecondition,
          );
        const made = await options.checkpoints.forkFiles(source, point.through);
        workspace = { ...source.workspace, id: made.id, name: made.name, path: made.path };
      }
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
      const copied = snapshot.messages.slice(0, point.through);
      const copy = {
        sourceId: source.id,
        through: point.through,
        title: forkTitle(source),
        // The copy may end with the model told it is Unrestricted; a fork starts Restricted.
        notice: input.state.mode === 'restricted' && needsRestrictedNotice(copied) ? RESTRICTED_NOTICE : null,
      };
      const stored = (record: ConversationRecord) =>
        create(ForkConversationResponseSchema, { conversation: conversationToProto(record, policy) });
      const respond = async (record: ConversationRecord) => create(ForkConversationResponseSchema, { conversation: await full(record) });
      const fork = () =>
        store.fork(
          input,
          copy,
          key ? { key, outcome: (record) => ({ response: toBinary(ForkConversationResponseSchema, stored(record)) }) } : undefined,
        );
      // A fork is one more conversation of the user: it meets their limit on conversations.
      const result = await (options.limits ? options.limits.admitConversation(source.ownerId, now(), fork) : fork());
      return result.kind === 'replayed' ? replay(result.prior, key!, ForkConversationResponseSchema) : respond(result.record);
    },

    sendMessage: (req, ctx) => {
      let decodeImages: (() => Promise<void>) | undefined;
      return act(ctx, {
        method: 'SendMessage',
        conversationId: req.conversationId,
        requestSchema: SendMessageRequestSchema,
        request: req,
        responseSchema: SendMessageResponseSchema,
        eventType: 'user_message',
        async event() {
          if (req.text.length > LIMITS.maxTextChars) {
            throw new ConnectError(
              `message text is ${req.text.length} characters; the limit is ${LIMITS.maxTextChars}`,
              Code.InvalidArgument,
            );
          }
          const delivery = deliveryFromProto(req.delivery);
          if (delivery === null) {
            throw new ConnectError(
              `delivery: ${req.delivery} is not a delivery mode; use REJECT, QUEUE, STEER or INTERRUPT.`,
              Code.InvalidArgument,
            );
          }
          decodeImages = validateImages(req.images, options.imagePixelsPerMessage ?? LIMITS.maxImagePixels);
          return {
            type: 'user_message',
            text: req.text,
            images: req.images.map((image) => ({ mediaType: image.mediaType, data: Buffer.from(image.data).toString('base64') })),
            ...(delivery === 'reject' ? {} : { delivery }),
          };
        },
        respond(result) {
          const state = result.record.state;
          // The message waits when this transition put it in the pending list.
          const queuedId = pendingMessageId(result.record.id, state.seq);
          const queued = result.kind === 'applied' && (state.pending ?? []).some((m) => m.id === queuedId);
          // Sent now: the last user message this transition persisted (waiting steers it delivered come before it).
          const message = result.kind === 'applied' && !queued ? result.persisted.filter((m) => m.type === 'user').at(-1) : undefined;
          return create(SendMessageResponseSchema, {
            ...(message ? { message: messageToProto(message) } : {}),
            state: stateToProto(state, policy),
            ...(queued ? { queuedId } : {}),
          });
        },
        admitted: () => decodeImages?.() ?? Promise.resolve(),
      });
    },

    cancelQueuedMessage: (req, ctx) =>
      act(ctx, {
        method: 'CancelQueuedMessage',
        conversationId: req.conversationId,
        requestSchema: CancelQueuedMessageRequestSchema,
        request: req,
        responseSchema: CancelQueuedMessageResponseSchema,
        eventType: 'user_cancel_queued',
        event() {
          if (!req.queuedId.trim()) throw new ConnectError('queued_id is required', Code.InvalidArgument);
          return { type: 'user_cancel_queued', queuedId: req.queuedId };
        },
        respond: (result) => create(CancelQueuedMessageResponseSchema, { state: stateToProto(result.record.state, policy) }),
      }),

    cancel: (req, ctx) =>
      act(ctx, {
        method: 'Cancel',
        conversationId: req.conversationId,
        requestSchema: CancelRequestSchema,
        request: req,
        responseSchema: CancelResponseSchema,
        eventType: 'user_cancel',
        event: () => ({ type: 'user_cancel' }),
        respond: (result) => create(CancelResponseSchema, { state: stateToProto(result.record.state, policy) }),
      }),

    respondToModeUpgrade: (req, ctx) =>
      act(ctx, {
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
      act(ctx, {
        method: 'DowngradeMode',
        conversationId: req.conversationId,
        requestSchema: DowngradeModeRequestSchema,
        request: req,
        responseSchema: DowngradeModeResponseSchema,
        eventType: 'user_request_downgrade',
        event: () => ({ type: 'user_request_downgrade' }),
        respond: (result) => create(DowngradeModeResponseSchema, { conversation: conversationToProto(result.record, policy) }),
      }),

    triggerContinuation: (req, ctx) =>
      act(ctx, {
        method: 'TriggerContinuation',
        conversationId: req.conversationId,
        requestSchema: TriggerContinuationRequestSchema,
        request: req,
        responseSchema: TriggerContinuationResponseSchema,
        eventType: 'user_trigger_continuation',
        event: () => ({ type: 'user_trigger_continuation' }),
        respond: (result) => create(TriggerContinuationResponseSchema, { state: stateToProto(result.record.state, policy) }),
      }),

    /** Applies from the next LLM request; nothing is stored when a value is refused. */
    async updateConversationSettings(req, ctx) {
      const record = await owned(ctx, req.conversationId);
      const thinking = thinkingOf(req.thinking);
      const serverTools = req.serverTools ? serverToolsOf(req.serverTools.tools) : null;
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
      if (earlier) return replay(earlier, key!, DeleteConversationResponseSchema);
      const respond = (ids: readonly string[]) => create(DeleteConversationResponseSchema, { deletedIds: [...ids] });
      const result = await deleteOwned(
        ctx,
        id,
        key ? { key, outcome: ({ ids }) => ({ response: toBinary(DeleteConversationResponseSchema, respond(ids)) }) } : undefined,
      );
      return 'prior' in result ? replay(result.prior, key!, DeleteConversationResponseSchema) : respond(result.ids);
    },

    async *watchConversation(req, ctx) {
      await owned(ctx, req.conversationId);
      yield* watchConversation({
        conversationId: req.conversationId,
        after: { sequence: req.afterSequence, deltaIndex: req.afterDeltaIndex },
        streams: options.streams,
        snapshot: async () => {
          const s = await store.snapshot(req.conversationId, LIMITS.subAgentsShown);
          if (!s) throw notFound(req.conversationId);
          return {
            conversation: await full(s.record),
            messages: s.messages.map(messageToProto),
            sequence: BigInt(s.record.notifySeq),
            subAgents: s.subAgents.map((r) => conversationToProto(r, policy)),
          };
        },
        heartbeatMs: options.heartbeatMs ?? 15_000,
        signal: ctx.signal,
      });
    },
  });
}
