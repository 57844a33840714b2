/** `bedrock token new | token hash TOKEN`: a bearer token and the hash web-bff's BEDROCK_TOKENS_FILE lists. */
import { generateToken, hashToken } from '@bedrock/platform/server';
import { EXIT, UsageError } from './exit-codes.ts';
import type { Output } from './output.ts';

export function token(rest: string[], output: Output): number {
  const [sub, token] = rest;
  if (sub === 'new' && rest.length === 1) {
    const t = generateToken();
    output.out(`token:  ${t}\nhash:   ${hashToken(t)}\n(add "USER_ID:${hashToken(t)}" to BEDROCK_TOKENS_FILE; keep the token secret)\n`);
    return EXIT.ok;
  }
  if (sub === 'hash' && token && rest.length === 2) {
    output.out(`${hashToken(token)}\n`);
    return EXIT.ok;
  }
  throw new UsageError(`expected "token new" or "token hash TOKEN"; bedrock help token shows its usage`);
}
