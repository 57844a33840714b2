/**
 * Serves the built web UI from a directory: files with their content type, `index.html` for
 * any other GET that is not a file (client-side routes), and when the directory has no
 * index.html a plain 404 page saying the UI is not built. Paths never leave the directory.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, resolve, sep } from 'node:path';
import type { NodeHandler } from './cors.ts';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.jpg': 'image/jpeg',
  '.jpeg': 'image/jpeg',
  '.gif': 'image/gif',
  '.webp': 'image/webp',
  '.ico': 'image/x-icon',
  '.woff': 'font/woff',
  '.woff2': 'font/woff2',
  '.ttf': 'font/ttf',
  '.txt': 'text/plain; charset=utf-8',
  '.wasm': 'application/wasm',
  '.webmanifest': 'application/manifest+json',
};

const NOT_BUILT = `<!doctype html>
<html><head><meta charset="utf-8"><title>Bedrock: web UI not built</title></head>
<body><h1>404: the Bedrock web UI is not built</h1>
<p>This server has no web UI files. Build the UI (see docs/web-bff.md) or set BEDROCK_UI_DIR to its build output.
The API is served here all the same; the <code>bedrock</code> CLI works without the UI.</p></body></html>
`;

export function contentTypeOf(path: string): string {
  return TYPES[extname(path).toLowerCase()] ?? 'application/octet-stream';
}

export function staticFiles(dir: string): NodeHandler {
  const root = resolve(dir);
  return (req, res) => {
    const send = (status: number, body: string, type = 'text/plain; charset=utf-8') => {
      res.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' });
      if (req.method === 'HEAD') res.end();
      else res.end(body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(404, 'not found\n');
      return;
    }
    let pathname: string;
    try {
      pathname = decodeURIComponent(new URL(req.url ?? '/', 'http://x').pathname);
    } catch {
      send(400, 'bad path\n');
      return;
    }
    const file = resolve(join(root, pathname));
    if (file !== root && !file.startsWith(root + sep)) {
      send(404, 'not found\n');
      return;
    }
    void (async () => {
      const found = await regularFile(file);
      const target = found ?? (await regularFile(join(root, 'index.html')));
      if (!target) {
        send(404, NOT_BUILT, 'text/html; charset=utf-8');
        return;
      }
      // A missing asset (with an extension) is a real 404, not the app shell.
      if (!found && extname(pathname) !== '' && !pathname.endsWith('.html')) {
        send(404, 'not found\n');
        return;
      }
      const immutable = found !== undefined && pathname.startsWith('/assets/');
      res.writeHead(200, {
        'content-type': contentTypeOf(target.path),
        'content-length': String(target.size),
        'cache-control': immutable ? 'public, max-age=31536000, immutable' : 'no-cache',
        'x-content-type-options': 'nosniff',
      });
      if (req.method === 'HEAD') {
        res.end();
        return;
      }
      const stream = createReadStream(target.path);
      stream.on('error', () => res.destroy());
      stream.pipe(res as unknown as NodeJS.WritableStream);
    })().catch(() => send(500, 'internal error\n'));
  };
}

async function regularFile(path: string): Promise<{ path: string; size: number } | undefined> {
  try {
    const s = await stat(path);
    if (s.isFile()) return { path, size: s.size };
    if (s.isDirectory()) {
      const index = join(path, 'index.html');
      const i = await stat(index).catch(() => undefined);
      if (i?.isFile()) return { path: index, size: i.size };
    }
  } catch {
    // missing
  }
  return undefined;
}
