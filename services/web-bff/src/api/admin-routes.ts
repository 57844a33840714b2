/**
 * The public `bedrock.v1.AdminService`: users and their tokens, and the audit log. Only users with the admin role
 * may call it (PERMISSION_DENIED, naming the method and the caller's role, for anyone else);
 * calls are forwarded to the conversation service, which keeps users and tokens in its
 * database, with the caller and their role.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { AdminService } from '@bedrock/contracts';
import { serveService, type Logger, type TokenStore } from '@bedrock/platform/server';
import { ROLE_KEY } from '../auth/auth-interceptor.ts';
import type { Upstream } from '../upstream/conversation-client.ts';
import { createForwarder, userOf, type UpstreamCallOptions } from '../upstream/forward.ts';

export interface AdminRoutesOptions {
  readonly upstream: Upstream;
  readonly logger: Logger;
  /** The tokens of BEDROCK_TOKENS_FILE / BEDROCK_TOKENS as loaded now: DeleteUser says when one of them names the deleted user. */
  readonly tokens?: () => TokenStore;
}

export function registerAdminRoutes(router: ConnectRouter, options: AdminRoutesOptions): void {
  const { upstream, logger } = options;
  const { admin } = upstream;

  const forward = createForwarder(upstream, logger);
  /** Only an admin's call goes on, with their role. */
  async function call<T>(method: string, ctx: HandlerContext, fn: (opts: UpstreamCallOptions) => Promise<T>): Promise<T> {
    const user = userOf(ctx);
    const role = ctx.values.get(ROLE_KEY);
    if (role !== 'admin') {
      throw new ConnectError(`${method} needs the admin role; user ${user} has the role ${role}`, Code.PermissionDenied);
    }
    return forward(method, ctx, fn, role);
  }

  serveService(router, AdminService, {
    addUser: (req, ctx) => call('AddUser', ctx, (o) => admin.addUser(req, o)),
    listUsers: (req, ctx) => call('ListUsers', ctx, (o) => admin.listUsers(req, o)),
    disableUser: (req, ctx) => call('DisableUser', ctx, (o) => admin.disableUser(req, o)),
    issueToken: (req, ctx) => call('IssueToken', ctx, (o) => admin.issueToken(req, o)),
    listTokens: (req, ctx) => call('ListTokens', ctx, (o) => admin.listTokens(req, o)),
    revokeToken: (req, ctx) => call('RevokeToken', ctx, (o) => admin.revokeToken(req, o)),
    listAuditEvents: (req, ctx) => call('ListAuditEvents', ctx, (o) => admin.listAuditEvents(req, o)),
    setUserLimits: (req, ctx) => call('SetUserLimits', ctx, (o) => admin.setUserLimits(req, o)),
    getUserLimits: (req, ctx) => call('GetUserLimits', ctx, (o) => admin.getUserLimits(req, o)),
    // The database forgets the user; a tokens-file entry still vouches for the id (docs/security.md).
    deleteUser: async (req, ctx) => {
      const res = await call('DeleteUser', ctx, (o) => admin.deleteUser(req, o));
      res.tokensFileEntryRemains = options.tokens?.().names.includes(req.userId) ?? false;
      return res;
    },
  });
}
