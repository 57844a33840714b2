/**
 * The client a call came from, forwarded to the conversation service for its audit log
 * (docs/security.md, "Audit"): the caller's `bedrock-client` header (the CLI, the web UI and
 * the editor agent send one), else its `user-agent`, cleaned and cut (`clientOf`). Nothing when
 * the caller sent neither. A client's own copy of any other internal header is never forwarded.
 */
import { CLIENT_HEADER, clientOf } from '@bedrock/contracts';

export function clientHeaders(incoming: Headers): Record<string, string> {
  const client = clientOf(incoming);
  return client ? { [CLIENT_HEADER]: client } : {};
}
