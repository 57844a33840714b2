/**
 * What the ConversationService handlers share: the service's options, and the answers every
 * concern gives (the caller's own conversation, a request's first outcome replayed, deletion).
 */
import { Code, ConnectError, type HandlerContext, type ServiceImpl } from '@connectrpc/connect';
import { fromBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { rejectionError, type Conversation, type ConversationService, type Message, type WriteAccess } from '@bedrock/contracts';
import type { NotificationStreams } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';
import type { ModelRegistry } from '@bedrock/contracts/models';
import type { Policy } from '../../core/index.ts';
import { conversationToProto } from '../../mapping/conversation.ts';
import { messageToProto } from '../../mapping/proto.ts';
import type { Applier } from '../../apply/applier.ts';
import type { ConversationRecord, ConversationStore } from '../../store/conversation-store.ts';
import type { PriorOutcome, RequestKey, RequestRecorder } from '../../store/request-outcomes.ts';
import { resolveServerTools, SettingsError, type ServerToolName, type ThinkingSetting } from '../../settings.ts';
import type { Checkpoints } from '../../checkpoints/checkpoints.ts';
import type { LimitsStore } from '../../spend/limits.ts';
import { createdConversationIdOf, endDeletedStreams, type ConversationLeftovers } from '../deleted-streams.ts';
import type { Workspaces } from '../../workspaces/workspaces.ts';
import { actorOf, notFound, requireId, userOf } from '../request-checks.ts';

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

/** The handlers of some RPCs of ConversationService; conversation-api.ts joins them into the full service. */
export type ConversationHandlers<K extends keyof ServiceImpl<typeof ConversationService>> = Pick<
  ServiceImpl<typeof ConversationService>,
  K
>;

/** The options, with their defaults, and the answers the handlers share. */
export interface ConversationApi {
  readonly options: ConversationApiOptions;
  readonly store: ConversationStore;
  readonly applier: Applier;
  readonly policy: Policy;
  readonly now: () => Date;
  /** One conversation as a client reads it alone: with its write access (lists go without). */
  full(record: ConversationRecord): Promise<Conversation>;
  /** The caller's conversation; someone else's, or none, is NOT_FOUND. */
  owned(ctx: HandlerContext, id: string): Promise<ConversationRecord>;
  /**
   * Answers a request whose id was used before with its first outcome (the same response or
   * the same error); a different body under the same id is INVALID_ARGUMENT.
   */
  replay<S extends DescMessage>(prior: PriorOutcome, key: RequestKey, schema: S): Promise<MessageShape<S>>;
  /**
   * Deletes a user's conversation tree (DeleteConversation, and a workspace deleted with its
   * conversations): the ids deleted, a replayed outcome, or the refusal as a ConnectError.
   */
  deleteOwned(
    ctx: HandlerContext,
    id: string,
    request?: RequestRecorder<{ ids: readonly string[] }>,
  ): Promise<{ ids: readonly string[] } | { prior: PriorOutcome }>;
  /** The server tools asked for, each allowed by the deployment; else INVALID_ARGUMENT naming BEDROCK_SERVER_TOOLS. */
  serverToolsOf(requested: Parameters<typeof resolveServerTools>[0]): ServerToolName[];
}

/** A request's first outcome answered again (ConversationApi.replay). */
async function replayOutcome<S extends DescMessage>(
  store: ConversationStore,
  prior: PriorOutcome,
  key: RequestKey,
  schema: S,
): Promise<MessageShape<S>> {
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

/** A user's conversation tree deleted (ConversationApi.deleteOwned). */
async function deleteOwned(
  options: ConversationApiOptions,
  ctx: HandlerContext,
  id: string,
  request?: RequestRecorder<{ ids: readonly string[] }>,
): Promise<{ ids: readonly string[] } | { prior: PriorOutcome }> {
  const result = await options.store.deleteTree(id, userOf(ctx), createdConversationIdOf, request, actorOf(ctx));
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
      await endDeletedStreams(
        {
          streams: options.streams,
          ...(options.leftovers ? { leftovers: options.leftovers } : {}),
          logger: options.logger,
          ...(options.deletedStreamGraceMs !== undefined ? { graceMs: options.deletedStreamGraceMs } : {}),
        },
        result.ids,
        result.notifySeqs,
      );
      await options.checkpoints?.forget(result.ids);
      options.logger.info({ conversation_id: id, deleted: result.ids.length }, 'conversation deleted');
      return { ids: result.ids };
  }
}

export function conversationApi(options: ConversationApiOptions): ConversationApi {
  const { store, policy } = options;
  const allowedServerTools = options.allowedServerTools ?? [];
  return {
    options,
    store,
    applier: options.applier,
    policy,
    now: options.now ?? (() => new Date()),

    async full(record) {
      const proto = conversationToProto(record, policy);
      const access = options.writeAccess ? await options.writeAccess(record) : undefined;
      if (access) proto.writeAccess = access;
      return proto;
    },

    async owned(ctx, id) {
      const user = userOf(ctx);
      const record = await store.get(requireId(id));
      if (!record || record.ownerId !== user) throw notFound(id);
      return record;
    },

    replay: (prior, key, schema) => replayOutcome(store, prior, key, schema),
    deleteOwned: (ctx, id, request) => deleteOwned(options, ctx, id, request),

    serverToolsOf(requested) {
      try {
        return resolveServerTools(requested, allowedServerTools);
      } catch (err) {
        if (err instanceof SettingsError) throw new ConnectError(err.message, Code.InvalidArgument);
        throw err;
      }
    },
  };
}
