/**
 * HTTP/2 session errors never end a process. Client side: a process calling through `createBalancedTransport`
 * whose peer drops the connection on every keepalive PING keeps running, and its next call works
 * (connect-es#1795; fixtures/hostile-h2-peer.ts). Server side: `serve()`'s h2c listener survives malformed
 * frames, dropped sockets and garbage instead of the preface, and answers the next request.
 */
import { describe, expect, it } from '@jest/globals';
import { spawn } from 'node:child_process';
import http2 from 'node:http2';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { serve } from '../src/server/serve.ts';

const here = path.dirname(fileURLToPath(import.meta.url));

describe('HTTP/2 session errors', () => {
  // The client is web-bff's and the llm-gateway's client of the conversation service; connect-es#1795: a
  // ping on a destroyed session threw out of a timer.
  it('a client whose peer drops the connection on every keepalive ping stays up, and its next call works', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'fixtures', 'hostile-h2-peer.ts'), '2000'], {
      cwd: path.join(here, '..'),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    child.stderr.on('data', (c: Buffer) => (err += c.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
    expect({ code, err: err.includes('ERR_HTTP2_INVALID_SESSION') ? 'ERR_HTTP2_INVALID_SESSION' : '' }).toEqual({ code: 0, err: '' });
    const drops = Number(/drops: (\d+)/.exec(out)?.[1]);
    expect(drops).toBeGreaterThan(10);
    expect(out).toContain('next call: SERVING');
  }, 30_000);

  // serve()'s h2c listener is every gRPC port's, and web-bff's: a client that sends a malformed frame, one
  // that drops its socket right after a PING, and one that sends garbage instead of the preface.
  it("serve()'s h2c listener survives malformed frames and sockets dropped mid-ping, and answers the next request", async () => {
    const served = await serve({
      protocol: 'h2c',
      host: '127.0.0.1',
      port: 0,
      handler: (_req, res) => {
        res.writeHead(200);
        res.end('ok');
      },
    });
    const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n');
    const frame = (type: number, flags: number, stream: number, payload: Buffer) => {
      const header = Buffer.alloc(9);
      header.writeUIntBE(payload.length, 0, 3);
      header[3] = type;
      header[4] = flags;
      header.writeUInt32BE(stream, 5);
      return Buffer.concat([header, payload]);
    };
    const SETTINGS = frame(4, 0, 0, Buffer.alloc(0));
    const hostile = [
      // DATA on stream 0: a connection error (PROTOCOL_ERROR).
      Buffer.concat([PREFACE, SETTINGS, frame(0, 0, 0, Buffer.from('bad'))]),
      // A PING of the wrong length (FRAME_SIZE_ERROR).
      Buffer.concat([PREFACE, SETTINGS, frame(6, 0, 0, Buffer.alloc(3))]),
      // A PING, then the socket is gone before the answer.
      Buffer.concat([PREFACE, SETTINGS, frame(6, 0, 0, Buffer.alloc(8))]),
      // Not HTTP/2 at all.
      Buffer.from('GET / HTTP/1.1\r\n\r\n\x00\x01garbage'),
    ];
    for (const bytes of hostile) {
      await new Promise<void>((resolve) => {
        const socket = net.connect(served.port, '127.0.0.1', () => {
          socket.write(bytes);
          socket.destroy();
          resolve();
        });
        socket.on('error', () => resolve());
      });
    }
    // Also: a malformed frame on a connection that stays open a moment.
    await new Promise<void>((resolve) => {
      const socket = net.connect(served.port, '127.0.0.1', () =>
        socket.write(Buffer.concat([PREFACE, SETTINGS, frame(0, 0, 0, Buffer.from('x'))])),
      );
      // The server answers with GOAWAY and closes; the socket goes after 500 ms at most.
      socket.resume();
      const timer = setTimeout(() => socket.destroy(), 500);
      socket.on('close', () => {
        clearTimeout(timer);
        resolve();
      });
      socket.on('error', () => undefined);
    });
    await new Promise((r) => setTimeout(r, 100));
    const session = http2.connect(served.url);
    const body = await new Promise<string>((resolve, reject) => {
      const req = session.request({ ':path': '/' });
      let text = '';
      req.on('data', (c: Buffer) => (text += c.toString()));
      req.on('end', () => resolve(text));
      req.on('error', reject);
      req.end();
    });
    session.close();
    expect(body).toBe('ok');
    await served.close(100);
  });
});
