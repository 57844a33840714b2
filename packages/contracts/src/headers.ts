/** Request headers whose meaning crosses a service boundary. */

/**
 * The header in which web-bff names the authenticated user to the conversation service. The
 * conversation service believes it only alongside web-bff's own service credential; web-bff
 * never forwards a client's copy.
 */
export const USER_HEADER = 'bedrock-user-id';
