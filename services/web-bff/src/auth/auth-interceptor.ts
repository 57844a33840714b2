/**
 * Authentication of every ConversationService call: `Authorization: Bearer <token>` must name
 * a configured user, else UNAUTHENTICATED. The user goes to the handlers through a context
 * value; whatever a client sends as `bedrock-user-id` is never forwarded. Health checking and
 * reflection stay open so probes and `buf curl --list-methods` work without a token.
 */
import { Code, ConnectError, createContextKey, type Interceptor } from '@connectrpc/connect';
import { ConversationService } from '@bedrock/contracts';
import { bearerToken, type TokenStore } from './token-store.ts';

/** The authenticated user of the call; empty outside ConversationService. */
export const USER_KEY = createContextKey<string>('', { description: 'authenticated bedrock user' });

export function authInterceptor(tokens: () => TokenStore): Interceptor {
  return (next) => async (req) => {
    if (req.service.typeName !== ConversationService.typeName) return next(req);
    const token = bearerToken(req.header.get('authorization'));
    if (!token) {
      throw new ConnectError('missing bearer token: send "Authorization: Bearer <token>"', Code.Unauthenticated);
    }
    const user = tokens().authenticate(token);
    if (!user) throw new ConnectError('invalid bearer token', Code.Unauthenticated);
    req.contextValues.set(USER_KEY, user);
    return next(req);
  };
}
