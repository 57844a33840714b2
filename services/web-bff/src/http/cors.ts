/**
 * CORS for browsers calling the API from another origin (the web UI's dev server, or a UI
 * hosted elsewhere). The UI served by web-bff itself is same-origin and needs none. Bearer
 * tokens are not ambient credentials, so allowing an origin lets its scripts call only with
 * a token they hold.
 */
import { cors } from '@connectrpc/connect';
import { CLIENT_HEADER } from '@bedrock/contracts';
import type { NodeHandler } from './node-types.ts';
import { RESUME_DELTA_HEADER, RESUME_SEQUENCE_HEADER } from './resume-headers.ts';

export type { NodeHandler };

// bedrock-client: the web UI names itself for the audit log.
const ALLOW_HEADERS = [...cors.allowedHeaders, 'Authorization', CLIENT_HEADER].join(', ');
const EXPOSE_HEADERS = [...cors.exposedHeaders, RESUME_SEQUENCE_HEADER, RESUME_DELTA_HEADER].join(', ');
const ALLOW_METHODS = cors.allowedMethods.join(', ');
/** Browsers cache a preflight answer this long, s. */
const MAX_AGE_S = 7200;

/** The origins of BEDROCK_CORS_ORIGINS (`*` among them: any) → whether an origin may call. */
export function parseOrigins(origins: readonly string[]): (origin: string) => boolean {
  const list = origins.map((s) => s.trim().replace(/\/+$/, '')).filter(Boolean);
  if (list.includes('*')) return () => true;
  const set = new Set(list);
  return (origin) => set.has(origin);
}

export function withCors(allowed: (origin: string) => boolean, next: NodeHandler): NodeHandler {
  return (req, res) => {
    const origin = req.headers.origin;
    if (typeof origin === 'string' && allowed(origin)) {
      res.setHeader('Access-Control-Allow-Origin', origin);
      res.setHeader('Vary', 'Origin');
      res.setHeader('Access-Control-Expose-Headers', EXPOSE_HEADERS);
      if (req.method === 'OPTIONS' && req.headers['access-control-request-method']) {
        res.setHeader('Access-Control-Allow-Methods', ALLOW_METHODS);
        res.setHeader('Access-Control-Allow-Headers', ALLOW_HEADERS);
        res.setHeader('Access-Control-Max-Age', String(MAX_AGE_S));
        res.writeHead(204);
        res.end();
        return;
      }
    }
    next(req, res);
  };
}
