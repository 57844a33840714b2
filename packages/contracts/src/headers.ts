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
 * A user id: letters, digits and `. _ @ -`, starting with a letter or digit, at most 128
 * characters (the names of web-bff's tokens file, the users of AdminService, and the values an
 * OpenID Connect claim may map to).
 */
export const USER_ID_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._@-]{0,127}$/;
