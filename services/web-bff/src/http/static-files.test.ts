import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { staticFiles } from './static-files.ts';

async function serve(dir: string): Promise<{ url: string; close: () => Promise<void> }> {
  const server = http.createServer(staticFiles(dir));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => new Promise((r) => server.close(() => r())) };
}

describe('static files', () => {
  let built: { url: string; close: () => Promise<void> };
  let empty: { url: string; close: () => Promise<void> };
  beforeAll(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bedrock-ui-'));
    mkdirSync(join(dir, 'assets'));
    writeFileSync(join(dir, 'index.html'), '<!doctype html><title>app</title>');
    writeFileSync(join(dir, 'assets', 'app-1234.js'), 'console.log(1)');
    writeFileSync(join(dir, 'assets', 'app.css'), 'body{}');
    writeFileSync(join(dir, 'logo.svg'), '<svg/>');
    built = await serve(dir);
    empty = await serve(join(dir, 'missing'));
  });
  afterAll(async () => {
    await built.close();
    await empty.close();
  });

  it('serves files with their content types', async () => {
    const js = await fetch(`${built.url}/assets/app-1234.js`);
    expect(js.status).toBe(200);
    expect(js.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(js.headers.get('cache-control')).toMatch(/immutable/);
    expect(await js.text()).toBe('console.log(1)');
    expect((await fetch(`${built.url}/assets/app.css`)).headers.get('content-type')).toBe('text/css; charset=utf-8');
    expect((await fetch(`${built.url}/logo.svg`)).headers.get('content-type')).toBe('image/svg+xml');
    const index = await fetch(`${built.url}/`);
    expect(index.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(index.headers.get('cache-control')).toBe('no-cache');
  });

  it('falls back to index.html for client routes but not for missing assets', async () => {
    const route = await fetch(`${built.url}/conversations/abc`);
    expect(route.status).toBe(200);
    expect(await route.text()).toContain('<title>app</title>');
    expect((await fetch(`${built.url}/assets/nope.js`)).status).toBe(404);
  });

  it('never leaves the directory', async () => {
    const res = await fetch(`${built.url}/..%2f..%2f..%2fetc%2fpasswd`);
    expect(res.status).toBe(404);
    expect(await res.text()).not.toContain('root:');
  });

  it('says the UI is not built when the directory has none', async () => {
    const res = await fetch(`${empty.url}/`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(await res.text()).toMatch(/web UI is not built/);
  });
});
