/** Request headers whose meaning crosses a service boundary. */

/**
 * The header in which web-bff names the authenticated user to the conversation service. The
 * conversation service believes it only alongside web-bff's own service credential; web-bff
 * never forwards a client's copy.
 */
export const USER_HEADER = 'bedrock-user-id';

/**
 * The header in which web-bff names the authenticated user's role (`user` or `admin`) to the
 * conversation service, next to {@link USER_HEADER} and believed under the same rule. Its
 * AdminService answers only `admin`.
 */
export const ROLE_HEADER = 'bedrock-user-role';

/**
 * Which client a call comes from, for the audit log (docs/security.md, "Audit"). Clients send
 * it to web-bff (the CLI `cli/<version>`, the web UI `web`, the editor agent `acp/<version>`);
 * web-bff forwards the client's value (or, without one, its `user-agent`) to the conversation
 * service under the same name. It is what the client says it is: a record, not a credential.
 */
export const CLIENT_HEADER = 'bedrock-client';

/** The longest client name web-bff forwards (longer ones are cut). */
export const CLIENT_MAX_LENGTH = 120;

/**
 * The client name web-bff forwards for a call with these headers: `bedrock-client`, else
 * `user-agent`, printable ASCII only, at most {@link CLIENT_MAX_LENGTH} characters; empty when
 * neither is there.
 */
export function clientOf(headers: { get(name: string): string | null }): string {
  return cleanClient(headers.get(CLIENT_HEADER)?.trim() || headers.get('user-agent') || '');
}

/** A client name as stored: printable ASCII (anything else becomes `?`), trimmed, at most {@link CLIENT_MAX_LENGTH} characters. */
export function cleanClient(value: string): string {
  return value
    .trim()
    .replace(/[^\x20-\x7e]/g, '?')
    .slice(0, CLIENT_MAX_LENGTH);
}

/**
 * A user id: letters, digits and `. _ @ -`, starting with a letter or digit, at most 128
 * characters (the names of web-bff's tokens file, the users of AdminService, and the values an
 * OpenID Connect claim may map to).
 */
export const USER_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
