/**
 * Security headers on every answer of the HTTP listeners (web UI, API, errors): a
 * Content-Security-Policy for the UI's files and a stricter one for API answers, `X-Frame-Options`,
 * `X-Content-Type-Options` and `Referrer-Policy`. What each is for: the Security headers table of
 * docs/web-bff.md, "The edge: what is checked before a body is read".
 */
import type { NodeHandler } from './node-types.ts';

/**
 * The UI's pages may load script, style, fonts and manifests only from this origin (no inline
 * script or style, no eval), images also from `data:` and `blob:` (attachment previews), talk
 * only to this origin, and be framed by nobody.
 */
export const UI_CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "font-src 'self'",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

/** API answers are data, never documents. */
export const API_CONTENT_SECURITY_POLICY = "default-src 'none'; frame-ancestors 'none'";

/**
 * No framing (for browsers without frame-ancestors), no content sniffing of API bodies or assets,
 * and no Referer: UI addresses carry conversation ids, and nothing here needs one (the API
 * authenticates with bearer tokens, not with where a call came from).
 */
const COMMON: Readonly<Record<string, string>> = {
  'x-frame-options': 'DENY',
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
};

/**
 * Sets the headers on every response before `next` answers; `isApi(path)` tells API routes
 * (gRPC, Connect and gRPC-Web calls) from the UI's files.
 */
export function withSecurityHeaders(isApi: (path: string) => boolean, next: NodeHandler): NodeHandler {
  return (req, res) => {
    const path = (req.url ?? '/').split('?', 1)[0]!;
    for (const [name, value] of Object.entries(COMMON)) res.setHeader(name, value);
    res.setHeader('content-security-policy', isApi(path) ? API_CONTENT_SECURITY_POLICY : UI_CONTENT_SECURITY_POLICY);
    next(req, res);
  };
}
