/**
 * IdentityService: web-bff asks who a bearer token or a signed-in identity is (users and tokens
 * live in this service's database; docs/security.md, "Users and sign-in"). Only the service
 * peer `web-bff` may call it: it answers for any token without a user, like the history API
 * does for the gateway.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import {
  IdentityService,
  IdentityStatus,
  ResolveUserResponseSchema,
  USER_ID_PATTERN,
  UserRole,
  VerifyTokenResponseSchema,
} from '@bedrock/contracts';
import { serveService, servicePeer, USER_IDENTITY_PEER } from '@bedrock/platform/server';
import type { IdentityStore, Role, Verdict } from '../store/identity-store.ts';

export interface IdentityApiOptions {
  readonly identities: IdentityStore;
  /** One user only (host paths on in the embedded product): a first OpenID Connect sign-in creates no user. */
  readonly oneUser: boolean;
}

/** Refuses every caller but web-bff (UNAUTHENTICATED without a credential, PERMISSION_DENIED for another service). */
export function requireWebBff(ctx: HandlerContext, service: string): void {
  const peer = servicePeer(ctx);
  if (peer === undefined) {
    throw new ConnectError(`missing service credential: ${service} answers only ${USER_IDENTITY_PEER}`, Code.Unauthenticated);
  }
  if (peer !== USER_IDENTITY_PEER) {
    throw new ConnectError(`service ${peer} may not call ${service}: only ${USER_IDENTITY_PEER} may`, Code.PermissionDenied);
  }
}

export const roleToProto = (role: Role): UserRole => (role === 'admin' ? UserRole.ADMIN : UserRole.USER);

const STATUS: Record<Verdict['status'], IdentityStatus> = {
  ok: IdentityStatus.OK,
  unknown: IdentityStatus.UNKNOWN,
  revoked: IdentityStatus.REVOKED,
  expired: IdentityStatus.EXPIRED,
  user_disabled: IdentityStatus.USER_DISABLED,
};

export function registerIdentityApi(router: ConnectRouter, options: IdentityApiOptions): void {
  const { identities } = options;
  serveService(router, IdentityService, {
    async verifyToken(req, ctx) {
      requireWebBff(ctx, IdentityService.typeName);
      if (req.tokenSha256.length !== 32) throw new ConnectError('token_sha256 must be 32 bytes (a SHA-256)', Code.InvalidArgument);
      const v = await identities.verifyToken(req.tokenSha256);
      if (v.status !== 'ok') return create(VerifyTokenResponseSchema, { status: STATUS[v.status], userId: v.userId ?? '' });
      return create(VerifyTokenResponseSchema, {
        status: IdentityStatus.OK,
        userId: v.userId,
        role: roleToProto(v.role),
        ...(v.expiresAt ? { expiresAt: timestampFromDate(v.expiresAt) } : {}),
      });
    },
    async resolveUser(req, ctx) {
      requireWebBff(ctx, IdentityService.typeName);
      if (!USER_ID_PATTERN.test(req.userId))
        throw new ConnectError('user_id must be letters, digits and . _ @ - (at most 128 characters)', Code.InvalidArgument);
      const displayName = req.displayName.trim().slice(0, 200) || req.userId;
      const v = await identities.resolveUser(req.userId, req.create && !options.oneUser ? { displayName } : undefined);
      return create(ResolveUserResponseSchema, {
        status: STATUS[v.status],
        role: v.status === 'ok' ? roleToProto(v.role) : UserRole.UNSPECIFIED,
        created: v.created ?? false,
      });
    },
  });
}
