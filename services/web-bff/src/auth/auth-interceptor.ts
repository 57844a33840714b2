/**
 * Authentication of every call of the protected services (ConversationService, AdminService and
 * the others of PROTECTED_SERVICES): `Authorization: Bearer <token>` must name a user
 * (./authenticator.ts), else UNAUTHENTICATED. The user and role go to the handlers as context
 * values; a client's own `bedrock-user-id` is never forwarded. Health checking and reflection stay
 * open so probes and `buf curl --list-methods` work without a token.
 */
import { createContextKey, type Interceptor } from '@connectrpc/connect';
import { AdminService, CheckpointService, ConversationService, McpService, WorkspaceService } from '@bedrock/contracts';
import { admittedIdentity } from '../http/api-guard.ts';
import { RAW_EXCHANGE } from '../http/raw-request.ts';
import { USER_KEY } from '../upstream/call-context.ts';
import type { Authenticator, Identity, Role } from './authenticator.ts';

/** The authenticated user's role. */
export const ROLE_KEY = createContextKey<Role>('user', { description: "authenticated bedrock user's role" });

/** Services whose every call needs an authenticated user. */
export const PROTECTED_SERVICES = [ConversationService, AdminService, WorkspaceService, McpService, CheckpointService] as const;
const PROTECTED = new Set<string>(PROTECTED_SERVICES.map((s) => s.typeName));

/**
 * The check the handlers rely on. The edge (http/api-guard.ts) makes the same check before a
 * request body is read, so an unauthenticated caller never gets a byte buffered; a request the
 * edge admitted is not authenticated twice.
 */
export function authInterceptor(auth: Authenticator): Interceptor {
  return (next) => async (req) => {
    if (!PROTECTED.has(req.service.typeName)) return next(req);
    // The edge (http/api-guard.ts) authenticated this request before its body was read; ask again only without it.
    const raw = req.contextValues.get(RAW_EXCHANGE);
    const admitted = raw && (admittedIdentity(raw.req) as Identity | undefined);
    const result = admitted ?? (await auth.authenticate(req.header.get('authorization')));
    if ('error' in result) throw result.error;
    req.contextValues.set(USER_KEY, result.user);
    req.contextValues.set(ROLE_KEY, result.role);
    return next(req);
  };
}
