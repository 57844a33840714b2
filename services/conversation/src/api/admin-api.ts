/**
 * AdminService (bedrock.v1): users and their tokens, for admins. web-bff authenticates the
 * caller, refuses non-admins, and forwards the call with the user (`bedrock-user-id`) and
 * their role (`bedrock-user-role`); both are believed only from web-bff, and this service
 * checks the role again.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  AddUserResponseSchema,
  AdminService,
  DisableUserResponseSchema,
  IssueTokenResponseSchema,
  ListTokensResponseSchema,
  ListUsersResponseSchema,
  RevokeTokenResponseSchema,
  ROLE_HEADER,
  USER_HEADER,
  USER_ID_PATTERN,
  UserRole,
  UserSchema,
  UserTokenSchema,
  type User,
  type UserToken,
} from '@bedrock/contracts';
import type { Logger } from '@bedrock/platform/server';
import type { IdentityStore, TokenRow, UserRow } from '../store/identity-store.ts';
import { requireWebBff, roleToProto } from './identity-api.ts';

export interface AdminApiOptions {
  readonly identities: IdentityStore;
  readonly logger: Logger;
}

const MAX_TEXT = 200;
/** Longest token lifetime: ten years. */
const MAX_EXPIRES_IN_SECONDS = 10n * 366n * 24n * 3600n;

function requireAdmin(ctx: HandlerContext, method: string): string {
  requireWebBff(ctx, AdminService.typeName);
  const user = ctx.requestHeader.get(USER_HEADER)?.trim();
  if (!user) throw new ConnectError(`missing ${USER_HEADER} header: call this service through web-bff`, Code.Unauthenticated);
  const role = ctx.requestHeader.get(ROLE_HEADER)?.trim() || 'user';
  if (role !== 'admin') throw new ConnectError(`${method} needs the admin role; user ${user} has the role ${role}`, Code.PermissionDenied);
  return user;
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
  const { identities, logger } = options;
  router.service(AdminService, {
    async addUser(req, ctx) {
      const admin = requireAdmin(ctx, 'AddUser');
      const id = userId(req.userId);
      if (req.role !== UserRole.UNSPECIFIED && req.role !== UserRole.USER && req.role !== UserRole.ADMIN)
        throw new ConnectError(`role ${req.role} is not a role`, Code.InvalidArgument);
      const role = req.role === UserRole.ADMIN ? 'admin' : 'user';
      const added = await identities.addUser({ id, displayName: text(req.displayName, 'display_name') || id, role });
      if (added === 'exists') throw new ConnectError(`user ${id} already exists`, Code.AlreadyExists);
      logger.info({ admin, user: id, role }, 'user added');
      return create(AddUserResponseSchema, { user: userToProto(added) });
    },
    async listUsers(_req, ctx) {
      requireAdmin(ctx, 'ListUsers');
      return create(ListUsersResponseSchema, { users: (await identities.listUsers()).map(userToProto) });
    },
    async disableUser(req, ctx) {
      const admin = requireAdmin(ctx, 'DisableUser');
      const id = userId(req.userId);
      const user = await identities.disableUser(id);
      if (!user) throw new ConnectError(`user ${id} not found`, Code.NotFound);
      logger.info({ admin, user: id }, 'user disabled');
      return create(DisableUserResponseSchema, { user: userToProto(user) });
    },
    async issueToken(req, ctx) {
      const admin = requireAdmin(ctx, 'IssueToken');
      const id = userId(req.userId);
      if (req.expiresInSeconds > MAX_EXPIRES_IN_SECONDS)
        throw new ConnectError(`expires_in_seconds is too large (at most ${MAX_EXPIRES_IN_SECONDS}, ten years)`, Code.InvalidArgument);
      const issued = await identities.issueToken(id, text(req.label, 'label'), Number(req.expiresInSeconds));
      if (issued === 'no_user') throw new ConnectError(`user ${id} not found (add the user first)`, Code.NotFound);
      if (issued === 'disabled') throw new ConnectError(`user ${id} is disabled`, Code.FailedPrecondition);
      logger.info({ admin, user: id, token: issued.row.id }, 'token issued');
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
      const token = await identities.revokeToken(req.tokenId);
      if (!token) throw new ConnectError(`token ${req.tokenId} not found`, Code.NotFound);
      logger.info({ admin, token: token.id, user: token.userId }, 'token revoked');
      return create(RevokeTokenResponseSchema, { token: tokenToProto(token) });
    },
  });
}
