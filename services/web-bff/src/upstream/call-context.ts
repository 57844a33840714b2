/** Who a public call is made as: set by the auth interceptor (auth/), read when forwarding upstream. */
import { createContextKey } from '@connectrpc/connect';

/** The authenticated user of the call; empty outside the protected services. */
export const USER_KEY = createContextKey<string>('', { description: 'authenticated bedrock user' });
