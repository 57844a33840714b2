/**
 * Authentication of every ConversationService call: `Authorization: Bearer <token>` must name
 * a configured user, else UNAUTHENTICATED. The user goes to the handlers through a context
 * value; whatever a client sends as `bedrock-user-id` is never forwarded. Health checking and
 * reflection stay open so probes and `buf curl --list-methods` work without a token.
 *
 * The edge (http/api-guard.ts) makes the same check before a request body is read, so an
 * unauthenticated caller never gets a byte buffered; this interceptor stays as the check the
 * handlers rely on.
 */
import { Code, ConnectError, createContextKey, type Interceptor } from '@connectrpc/connect';
import { ConversationService } from '@bedrock/contracts';
import { bearerToken, type TokenStore } from './token-store.ts';

/** The authenticated user of the call; empty outside ConversationService. */
export const USER_KEY = createContextKey<string>('', { description: 'authenticated bedrock user' });

/** The user an `Authorization` header names, or the UNAUTHENTICATED error to answer (never repeating the token). */
export function authenticateBearer(
  authorization: string | null | undefined,
  tokens: TokenStore,
): { user: string } | { error: ConnectError } {
  const token = bearerToken(authorization);
  if (!token) return { error: new ConnectError('missing bearer token: send "Authorization: Bearer <token>"', Code.Unauthenticated) };
  const user = tokens.authenticate(token);
  if (!user) return { error: new ConnectError('invalid bearer token', Code.Unauthenticated) };
  return { user };
}

export function authInterceptor(tokens: () => TokenStore): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== ConversationService.typeName) return next(req);
    const result = authenticateBearer(req.header.get('authorization'), tokens());
    if ('error' in result) throw result.error;
    req.contextValues.set(USER_KEY, result.user);
    return next(req);
  };
}
