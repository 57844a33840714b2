/**
 * AdminService (bedrock.v1): users and their tokens, and the audit log, for admins. web-bff authenticates the
 * caller, refuses non-admins, and forwards the call with the user (`bedrock-user-id`) and
 * their role (`bedrock-user-role`); both are believed only from web-bff, and this service
 * checks the role again. Every change of a user or token is audited in its own statement
 * (store/identity-store.ts); the audit log is only read here (ListAuditEvents).
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create, fromBinary, toBinary, type JsonObject } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  AddUserResponseSchema,
  AdminService,
  AuditEventSchema,
  CLIENT_HEADER,
  cleanClient,
  ListAuditEventsResponseSchema,
  DisableUserResponseSchema,
  IssueTokenResponseSchema,
  ListTokensResponseSchema,
  ListUsersResponseSchema,
  RevokeTokenResponseSchema,
  SetUserLimitsResponseSchema,
  GetUserLimitsResponseSchema,
  DeleteUserRequestSchema,
  DeleteUserResponseSchema,
  rejectionError,
  ROLE_HEADER,
  USER_HEADER,
  USER_ID_PATTERN,
  UserRole,
  UserSchema,
  UserTokenSchema,
  type User,
  type UserToken,
} from '@bedrock/contracts';
import { serveService, type Logger } from '@bedrock/platform/server';
import type { IdentityStore, TokenRow, UserRow } from '../store/identity-store.ts';
import type { AuditStore, StoredAuditEvent } from '../store/audit-store.ts';
import { AUDIT_ACTIONS, type AuditActor } from '../store/audit-store.ts';
import { requireWebBff, roleToProto } from './identity-api.ts';
import { usageToProto, type Limits, type LimitsStore } from '../spend/limits.ts';
import type { ConversationStore, DeletedUserRow } from '../store/conversation-store.ts';
import { requestFingerprint, requestIdProblem, type RequestKey } from '../store/request-outcomes.ts';
import { createdConversationIdOf, endDeletedStreams, type DeletedStreamsOptions } from './deleted-streams.ts';
import type { Workspaces } from '../workspaces/workspaces.ts';

export interface AdminApiOptions {
  readonly identities: IdentityStore;
  readonly audit: AuditStore;
  readonly logger: Logger;
  /** Per-user limits (SetUserLimits, GetUserLimits); absent: those calls are UNIMPLEMENTED. */
  readonly limits?: LimitsStore;
  /** The clock of spend periods; default the system clock. */
  readonly now?: () => Date;
  /** DeleteUser: the conversations' store, and the end of the deleted conversations' streams. */
  readonly deletion: { readonly store: ConversationStore } & DeletedStreamsOptions;
  /** A deleted user's workspace files. */
  readonly workspaces: Pick<Workspaces, 'removeFiles'>;
  /** One user only (host paths on in the embedded product): AddUser is refused. */
  readonly oneUser: boolean;
}

/** Why AddUser is refused while host paths are on. */
export const HOST_PATHS_ONE_USER =
  'this installation lets conversations use any directory of the host (BEDROCK_HOST_PATHS=on), which is safe for one user only: restart it with BEDROCK_HOST_PATHS=off (conversations then run in workspaces, each user as their own uid) before adding users';

const MAX_TEXT = 200;
/** Longest token lifetime: ten years. */
const MAX_EXPIRES_IN_SECONDS = 10n * 366n * 24n * 3600n;

/** The admin calling (with the client web-bff saw, for the audit log); anyone else is refused. */
function requireAdmin(ctx: HandlerContext, method: string): AuditActor {
  requireWebBff(ctx, AdminService.typeName);
  const user = ctx.requestHeader.get(USER_HEADER)?.trim();
  if (!user) throw new ConnectError(`missing ${USER_HEADER} header: call this service through web-bff`, Code.Unauthenticated);
  const role = ctx.requestHeader.get(ROLE_HEADER)?.trim() || 'user';
  if (role !== 'admin') throw new ConnectError(`${method} needs the admin role; user ${user} has the role ${role}`, Code.PermissionDenied);
  return { userId: user, client: cleanClient(ctx.requestHeader.get(CLIENT_HEADER) ?? '') };
}

const DEFAULT_PAGE = 100;
const MAX_PAGE = 1000;

function auditToProto(e: StoredAuditEvent) {
  return create(AuditEventSchema, {
    id: e.id,
    at: timestampFromDate(e.at),
    userId: e.userId,
    action: e.action,
    conversationId: e.conversationId ?? '',
    details: e.details as JsonObject,
  });
}

function userId(id: string, field = 'user_id'): string {
  if (!USER_ID_PATTERN.test(id))
    throw new ConnectError(
      `${field} must be letters, digits and . _ @ -, starting with a letter or digit (at most 128 characters)`,
      Code.InvalidArgument,
    );
  return id;
}

function text(value: string, field: string): string {
  const t = value.trim();
  if (t.length > MAX_TEXT) throw new ConnectError(`${field} is too long (at most ${MAX_TEXT} characters)`, Code.InvalidArgument);
  if (/[\r\n]/.test(t)) throw new ConnectError(`${field} must be one line`, Code.InvalidArgument);
  return t;
}

const ts = (d: Date | null) => (d ? timestampFromDate(d) : undefined);

/** The key of a DeleteUser request id, scoped to the calling admin alone; undefined without one. */
function deleteUserKey(admin: string, req: { userId: string; requestId: string }): RequestKey | undefined {
  if (!req.requestId) return undefined;
  const problem = requestIdProblem(req.requestId);
  if (problem) throw new ConnectError(problem, Code.InvalidArgument);
  const body = toBinary(DeleteUserRequestSchema, create(DeleteUserRequestSchema, { userId: req.userId }));
  return { ownerId: admin, scope: '', requestId: req.requestId, method: 'DeleteUser', fingerprint: requestFingerprint('DeleteUser', body) };
}

const deletedUserOf = (u: DeletedUserRow): UserRow => ({
  id: u.id,
  displayName: u.display_name,
  role: u.role,
  createdAt: u.created_at,
  disabledAt: u.disabled_at,
});

function userToProto(u: UserRow): User {
  return create(UserSchema, {
    id: u.id,
    displayName: u.displayName,
    role: roleToProto(u.role),
    createdAt: ts(u.createdAt),
    disabledAt: ts(u.disabledAt),
  });
}

function tokenToProto(t: TokenRow): UserToken {
  return create(UserTokenSchema, {
    id: t.id,
    userId: t.userId,
    label: t.label,
    createdAt: ts(t.createdAt),
    expiresAt: ts(t.expiresAt),
    revokedAt: ts(t.revokedAt),
    lastUsedAt: ts(t.lastUsedAt),
  });
}

export function registerAdminApi(router: ConnectRouter, options: AdminApiOptions): void {
  const { identities, audit, logger } = options;
  const now = options.now ?? (() => new Date());
  const limitsOf = (): LimitsStore => {
    if (!options.limits) throw new ConnectError('this service keeps no limits', Code.Unimplemented);
    return options.limits;
  };

  serveService(router, AdminService, {
    async addUser(req, ctx) {
      const admin = requireAdmin(ctx, 'AddUser');
      const id = userId(req.userId);
      if (req.role !== UserRole.UNSPECIFIED && req.role !== UserRole.USER && req.role !== UserRole.ADMIN)
        throw new ConnectError(`role ${req.role} is not a role`, Code.InvalidArgument);
      const role = req.role === UserRole.ADMIN ? 'admin' : 'user';
      if (options.oneUser) throw new ConnectError(HOST_PATHS_ONE_USER, Code.FailedPrecondition);
      const added = await identities.addUser({ id, displayName: text(req.displayName, 'display_name') || id, role }, admin);
      if (added === 'exists') throw new ConnectError(`user ${id} already exists`, Code.AlreadyExists);
      logger.info({ admin: admin.userId, user: id, role }, 'user added');
      return create(AddUserResponseSchema, { user: userToProto(added) });
    },
    async listUsers(_req, ctx) {
      requireAdmin(ctx, 'ListUsers');
      return create(ListUsersResponseSchema, { users: (await identities.listUsers()).map(userToProto) });
    },
    async disableUser(req, ctx) {
      const admin = requireAdmin(ctx, 'DisableUser');
      const id = userId(req.userId);
      const user = await identities.disableUser(id, admin);
      if (!user) throw new ConnectError(`user ${id} not found`, Code.NotFound);
      logger.info({ admin: admin.userId, user: id }, 'user disabled');
      return create(DisableUserResponseSchema, { user: userToProto(user) });
    },
    async issueToken(req, ctx) {
      const admin = requireAdmin(ctx, 'IssueToken');
      const id = userId(req.userId);
      if (req.expiresInSeconds > MAX_EXPIRES_IN_SECONDS)
        throw new ConnectError(`expires_in_seconds is too large (at most ${MAX_EXPIRES_IN_SECONDS}, ten years)`, Code.InvalidArgument);
      const issued = await identities.issueToken(id, text(req.label, 'label'), Number(req.expiresInSeconds), admin);
      if (issued === 'no_user') throw new ConnectError(`user ${id} not found (add the user first)`, Code.NotFound);
      if (issued === 'disabled') throw new ConnectError(`user ${id} is disabled`, Code.FailedPrecondition);
      logger.info({ admin: admin.userId, user: id, token: issued.row.id }, 'token issued');
      return create(IssueTokenResponseSchema, { token: tokenToProto(issued.row), secret: issued.secret });
    },
    async listTokens(req, ctx) {
      requireAdmin(ctx, 'ListTokens');
      const id = req.userId ? userId(req.userId) : undefined;
      return create(ListTokensResponseSchema, { tokens: (await identities.listTokens(id)).map(tokenToProto) });
    },
    async revokeToken(req, ctx) {
      const admin = requireAdmin(ctx, 'RevokeToken');
      if (!req.tokenId.trim() || req.tokenId.length > 128) throw new ConnectError('token_id is required', Code.InvalidArgument);
      const token = await identities.revokeToken(req.tokenId, admin);
      if (!token) throw new ConnectError(`token ${req.tokenId} not found`, Code.NotFound);
      logger.info({ admin: admin.userId, token: token.id, user: token.userId }, 'token revoked');
      return create(RevokeTokenResponseSchema, { token: tokenToProto(token) });
    },
    async listAuditEvents(req, ctx) {
      requireAdmin(ctx, 'ListAuditEvents');
      if (req.action && !(AUDIT_ACTIONS as readonly string[]).includes(req.action))
        throw new ConnectError(`action ${req.action} is not audited; the actions are ${AUDIT_ACTIONS.join(', ')}`, Code.InvalidArgument);
      let beforeId: bigint | undefined;
      if (req.pageToken) {
        if (!/^[1-9]\d{0,18}$/.test(req.pageToken)) throw new ConnectError('page_token is not one this RPC returned', Code.InvalidArgument);
        beforeId = BigInt(req.pageToken);
      }
      if (req.pageSize > MAX_PAGE) throw new ConnectError(`page_size is at most ${MAX_PAGE}`, Code.InvalidArgument);
      const limit = req.pageSize || DEFAULT_PAGE;
      // One more than asked: whether another page follows.
      const rows = await audit.list({
        ...(req.userId ? { userId: userId(req.userId) } : {}),
        ...(req.action ? { action: req.action } : {}),
        ...(req.since ? { since: timestampDate(req.since) } : {}),
        ...(req.until ? { until: timestampDate(req.until) } : {}),
        ...(beforeId !== undefined ? { beforeId } : {}),
        limit: limit + 1,
      });
      const page = rows.slice(0, limit);
      return create(ListAuditEventsResponseSchema, {
        events: page.map(auditToProto),
        nextPageToken: rows.length > limit ? page[page.length - 1]!.id : '',
      });
    },

    async setUserLimits(req, ctx) {
      const admin = requireAdmin(ctx, 'SetUserLimits');
      const id = userId(req.userId);
      const change: { -readonly [K in keyof Limits]?: number } = {};
      const amount = (value: bigint, field: string): number => {
        if (value < 0n || value > BigInt(Number.MAX_SAFE_INTEGER))
          throw new ConnectError(`${field} must be 0 (no budget) or a positive number of micro-dollars`, Code.InvalidArgument);
        return Number(value);
      };
      if (req.dailyBudgetMicros !== undefined) change.dailyBudgetMicros = amount(req.dailyBudgetMicros, 'daily_budget_micros');
      if (req.monthlyBudgetMicros !== undefined) change.monthlyBudgetMicros = amount(req.monthlyBudgetMicros, 'monthly_budget_micros');
      if (req.maxBusyConversations !== undefined) change.maxBusyConversations = req.maxBusyConversations;
      if (req.messagesPerMinute !== undefined) change.messagesPerMinute = req.messagesPerMinute;
      if (req.maxConversations !== undefined) change.maxConversations = req.maxConversations;
      if (req.reset && Object.keys(change).length > 0)
        throw new ConnectError('reset returns every limit to the defaults: give no limit with it', Code.InvalidArgument);
      if (!req.reset && Object.keys(change).length === 0)
        throw new ConnectError('give at least one limit to set (or reset)', Code.InvalidArgument);
      const figures = await limitsOf().set(id, req.reset ? 'reset' : change, admin, now());
      options.logger.info({ user: id, by: admin.userId, limits: figures.limits }, 'user limits changed');
      return create(SetUserLimitsResponseSchema, { usage: usageToProto(figures) });
    },

    /**
     * Deletes a user and their data (store.deleteUser: one transaction), refused while any of
     * their conversations is busy; then, after the commit, the end of every deleted
     * conversation's notification stream, as DeleteConversation does.
     */
    async deleteUser(req, ctx) {
      const admin = requireAdmin(ctx, 'DeleteUser');
      const id = userId(req.userId);
      if (id === admin.userId) throw new ConnectError(`you cannot delete yourself (${id}): another admin can`, Code.InvalidArgument);
      const key = deleteUserKey(admin.userId, req);
      const { store } = options.deletion;
      const replay = (prior: { sameRequest: boolean; outcome: { response?: Uint8Array } }) => {
        if (!prior.sameRequest || !prior.outcome.response)
          throw new ConnectError(
            `request id ${JSON.stringify(req.requestId)} reused for a different request: use a new request id for a new request`,
            Code.InvalidArgument,
          );
        return fromBinary(DeleteUserResponseSchema, prior.outcome.response);
      };
      const earlier = key ? await store.findRequest(key) : null;
      if (earlier) return replay(earlier);
      const respond = (r: { ids: readonly string[]; user: DeletedUserRow | null; tokens: number }) =>
        create(DeleteUserResponseSchema, {
          ...(r.user ? { user: userToProto(deletedUserOf(r.user)) } : {}),
          deletedConversationIds: [...r.ids],
          deletedTokens: r.tokens,
        });
      const result = await store.deleteUser(
        id,
        admin,
        createdConversationIdOf,
        key ? { key, outcome: (r) => ({ response: toBinary(DeleteUserResponseSchema, respond(r)) }) } : undefined,
      );
      switch (result.kind) {
        case 'replayed':
          return replay(result.prior);
        case 'not_found':
          throw new ConnectError(`user ${id} not found (no user row and no conversation)`, Code.NotFound);
        case 'busy': {
          const first = result.busy[0]!;
          const root = result.rootOf.get(first.id) ?? first.id;
          const what =
            root === first.id
              ? `conversation ${first.id} of user ${id} is busy (${first.state.phase.kind.replaceAll('_', ' ')})`
              : `conversation ${root} of user ${id} has a busy sub-agent (${first.id}: ${first.state.phase.kind.replaceAll('_', ' ')})`;
          throw rejectionError({
            code: 'conversation_busy',
            message: `${what}: cancel it first (the user: bedrock cancel ${root}; or disable the user and wait for the turn to end), then delete the user. Nothing was deleted.`,
          });
        }
        case 'deleted':
          await endDeletedStreams(options.deletion, result.ids, result.notifySeqs);
          await options.workspaces.removeFiles(result.workspaceIds);
          logger.info(
            { admin: admin.userId, user: id, conversations: result.ids.length, tokens: result.tokens, had_user_row: result.user !== null },
            'user deleted',
          );
          return respond(result);
      }
    },

    async getUserLimits(req, ctx) {
      requireAdmin(ctx, 'GetUserLimits');
      return create(GetUserLimitsResponseSchema, { usage: usageToProto(await limitsOf().usage(userId(req.userId), now())) });
    },
  });
}
