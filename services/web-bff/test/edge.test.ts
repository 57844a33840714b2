/**
 * The public edge of web-bff, against real servers: an unauthenticated call is refused before its
 * body is read (six 60 MB POSTs at once, every protocol, both listeners, while a separate web-bff
 * process's RSS barely moves); an authenticated large body within the limit still works; the open
 * services (health, reflection) take small bodies only; a body that does not parse is
 * INVALID_ARGUMENT on every protocol; security headers on the UI's files and on API answers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, toBinary } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { health } from '@bedrock/contracts';
import { generateToken, hashToken } from '../src/auth/token-store.ts';
import { UI_CONTENT_SECURITY_POLICY } from '../src/http/security-headers.ts';
import { noisePng } from '../../conversation/test/support/images.ts';
import { startSystem, type System } from './support/system.ts';
import { envelope, grpcStatusOf, lastFrame } from '@bedrock/testkit/raw-rpc';

const MAIN = fileURLToPath(new URL('../src/main.ts', import.meta.url));
const SEND = '/bedrock.v1.ConversationService/SendMessage';
const WATCH = '/bedrock.v1.ConversationService/WatchConversation';
const CHECK = '/grpc.health.v1.Health/Check';
const MB = 1024 * 1024;

let s: System;
let uiDir: string;
let workDir: string;
beforeAll(async () => {
  uiDir = mkdtempSync(join(tmpdir(), 'bedrock-edge-ui-'));
  workDir = mkdtempSync(join(tmpdir(), 'bedrock-edge-work-'));
  mkdirSync(join(uiDir, 'assets'));
  writeFileSync(join(uiDir, 'index.html'), '<!doctype html><title>t</title><script type="module" src="/assets/app.js"></script>\n');
  writeFileSync(join(uiDir, 'assets', 'app.js'), 'console.log(1);\n');
  s = await startSystem({ label: 'edge', bff: { http: { uiDir } } });
});
afterAll(async () => {
  await s?.close();
  for (const d of [uiDir, workDir]) if (d) rmSync(d, { recursive: true, force: true });
});

interface Answer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly trailers: Record<string, string>;
  readonly body: Buffer;
  /** From the start of the request to the answer's headers, ms. */
  readonly answeredMs: number;
  /** Body bytes the client had handed to the connection when the answer came. */
  readonly sentAtAnswer: number;
  /** Whether the server said 100 Continue. */
  readonly continued: boolean;
}

const strings = (h: http.IncomingHttpHeaders | http2.IncomingHttpHeaders): Record<string, string> =>
  Object.fromEntries(
    Object.entries(h).flatMap(([k, v]) => (typeof v === 'string' ? [[k, v]] : typeof v === 'number' ? [[k, String(v)]] : [])),
  );

/**
 * POSTs `size` bytes (a first `head`, then filler) over HTTP/1.1, writing only as fast as the
 * connection takes them, and stops sending once an answer arrives.
 */
function postH1(url: string, path: string, headers: Record<string, string>, size: number, head: Buffer = Buffer.alloc(0)): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const req = http.request(`${url}${path}`, { method: 'POST', agent: false, headers: { ...headers, 'content-length': String(size) } });
    const filler = Buffer.alloc(MB, 0x61);
    let sent = 0;
    let answered: Omit<Answer, 'body' | 'trailers'> | undefined;
    let continued = false;
    const pump = () => {
      while (!answered && sent < size && !req.destroyed) {
        const chunk = sent === 0 && head.length > 0 ? head : filler.subarray(0, Math.min(filler.length, size - sent));
        sent += chunk.length;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered && sent >= size) req.end();
    };
    req.on('continue', () => {
      continued = true;
      pump();
    });
    req.on('response', (res) => {
      answered = {
        status: res.statusCode ?? 0,
        headers: strings(res.headers),
        answeredMs: performance.now() - started,
        sentAtAnswer: sent,
        continued,
      };
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        req.destroy();
        resolve({ ...answered!, trailers: {}, body: Buffer.concat(chunks) });
      });
      res.on('error', () => resolve({ ...answered!, trailers: {}, body: Buffer.concat(chunks) }));
    });
    // The server closes the connection after refusing: the client's unsent body fails to write.
    req.on('error', (err) => {
      if (!answered) reject(err);
    });
    if (String(headers.expect ?? '') !== '100-continue') pump();
    else req.flushHeaders();
  });
}

/** The same over h2c (prior knowledge), one session per call. */
function postH2(url: string, path: string, headers: Record<string, string>, size: number, head: Buffer = Buffer.alloc(0)): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    const session = http2.connect(url);
    session.on('error', () => undefined);
    const stream = session.request({ ':method': 'POST', ':path': path, ...headers });
    const filler = Buffer.alloc(MB, 0x61);
    let sent = 0;
    let answered: Omit<Answer, 'body' | 'trailers'> | undefined;
    let trailers: Record<string, string> = {};
    const chunks: Buffer[] = [];
    const pump = () => {
      while (!answered && sent < size && !stream.destroyed) {
        const chunk = sent === 0 && head.length > 0 ? head : filler.subarray(0, Math.min(filler.length, size - sent));
        sent += chunk.length;
        if (!stream.write(chunk)) {
          stream.once('drain', pump);
          return;
        }
      }
      if (!answered && sent >= size) stream.end();
    };
    let done = false;
    // The answer is complete at its trailers or at the end of its body; the client, which has
    // its status, then ends the stream if the server has not (as gRPC clients do).
    const finish = () => {
      if (done) return;
      done = true;
      if (!answered) {
        reject(new Error(`stream closed without an answer (code ${stream.rstCode})`));
      } else {
        resolve({ ...answered, trailers, body: Buffer.concat(chunks) });
      }
      if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
      session.close();
    };
    stream.on('response', (h) => {
      answered = {
        status: Number(h[':status']),
        headers: strings(h),
        answeredMs: performance.now() - started,
        sentAtAnswer: sent,
        continued: false,
      };
    });
    stream.on('trailers', (t) => {
      trailers = strings(t);
      finish();
    });
    stream.on('data', (c: Buffer) => chunks.push(c));
    stream.on('end', finish);
    stream.on('error', (err) => {
      if (!answered) reject(err);
    });
    stream.on('close', finish);
    pump();
  });
}

/** The Connect/gRPC code an answer carries, whatever the protocol. */
function codeOf(a: Answer): { code: string; message: string } {
  const type = a.headers['content-type'] ?? '';
  if (type.startsWith('application/grpc-web')) {
    const data = lastFrame(a.body).data;
    return {
      code: Code[Number(/grpc-status: (\d+)/.exec(data)?.[1])]!,
      message: decodeURIComponent(/grpc-message: (.*)\r\n/.exec(data)?.[1] ?? ''),
    };
  }
  if (type.startsWith('application/grpc')) {
    const g = grpcStatusOf(a);
    return { code: Code[g.code]!, message: g.message };
  }
  const json = JSON.parse((type.startsWith('application/connect+') ? lastFrame(a.body).data : a.body.toString()) || '{}') as {
    code?: string;
    message?: string;
    error?: { code: string; message: string };
  };
  const e = json.error ?? json;
  const name = (e.code ?? '').replace(/_(.)/g, (_, c: string) => c.toUpperCase());
  return { code: name.charAt(0).toUpperCase() + name.slice(1), message: e.message ?? '' };
}

function rssKb(pid: number): number {
  try {
    return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0; // the process is gone (the test then fails on its answers)
  }
}

describe('unauthenticated calls are refused before their body is read', () => {
  let child: ChildProcess | undefined;
  let httpUrl = '';
  let grpcUrl = '';
  const token = generateToken();

  beforeAll(async () => {
    // A web-bff of its own, so its RSS is its own (the test's client buffers are not in it).
    child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      env: {
        PATH: process.env.PATH ?? '',
        BEDROCK_PORT: '0',
        BEDROCK_GRPC_PORT: '0',
        BEDROCK_METRICS_PORT: '0',
        BEDROCK_HOST: '127.0.0.1',
        BEDROCK_TRANSPORT: 'memory',
        BEDROCK_TOKENS: `alice:${hashToken(token)}`,
        BEDROCK_CONVERSATION_URL: 'http://127.0.0.1:9/',
        BEDROCK_UI_DIR: uiDir,
        LOG_LEVEL: 'info',
      },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines = createInterface({ input: child.stdout! });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error('web-bff did not start within 30 s')), 30_000);
      lines.on('line', (line) => {
        try {
          const entry = JSON.parse(line) as { msg?: string; http_port?: number; grpc_port?: number };
          if (entry.msg === 'web-bff started') {
            httpUrl = `http://127.0.0.1:${entry.http_port}`;
            grpcUrl = `http://127.0.0.1:${entry.grpc_port}`;
            clearTimeout(timer);
            resolve();
          }
        } catch {
          // not JSON
        }
      });
      child!.once('exit', (code) => reject(new Error(`web-bff exited with ${code}`)));
    });
  }, 40_000);

  afterAll(async () => {
    if (child && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((resolve) => child!.once('exit', resolve));
    }
  });

  it('answers six parallel 60 MB POSTs (every protocol, both listeners) at once, without buffering them', async () => {
    const size = 60 * MB;
    const pid = child!.pid!;
    // Warm up every path once (JIT, lazily loaded code), then take the baseline.
    await Promise.all([
      postH1(httpUrl, SEND, { 'content-type': 'application/proto' }, 10),
      postH2(grpcUrl, SEND, { 'content-type': 'application/grpc', te: 'trailers' }, 10),
    ]);
    await new Promise((r) => setTimeout(r, 200));
    const baseKb = rssKb(pid);
    let peakKb = baseKb;
    const sampler = setInterval(() => (peakKb = Math.max(peakKb, rssKb(pid))), 10);
    const wrong = { authorization: `Bearer ${token}x` };
    const started = performance.now();
    const answers = await Promise.all([
      postH1(httpUrl, SEND, { 'content-type': 'application/proto' }, size),
      postH1(httpUrl, SEND, { 'content-type': 'application/json', ...wrong }, size),
      postH1(httpUrl, SEND, { 'content-type': 'application/grpc-web+proto' }, size),
      postH2(grpcUrl, SEND, { 'content-type': 'application/grpc', te: 'trailers' }, size),
      postH2(grpcUrl, SEND, { 'content-type': 'application/proto', ...wrong }, size),
      postH2(grpcUrl, WATCH, { 'content-type': 'application/connect+proto' }, size),
    ]);
    const totalMs = performance.now() - started;
    await new Promise((r) => setTimeout(r, 100));
    clearInterval(sampler);
    peakKb = Math.max(peakKb, rssKb(pid));
    const growthMb = (peakKb - baseKb) / 1024;
    console.log(
      `6 x 60 MB unauthenticated POSTs: answered in ${answers.map((a) => a.answeredMs.toFixed(0)).join(', ')} ms (all done in ${totalMs.toFixed(0)} ms); ` +
        `body bytes the clients had sent by then: ${answers.map((a) => (a.sentAtAnswer / MB).toFixed(1)).join(', ')} MB; ` +
        `web-bff RSS ${(baseKb / 1024).toFixed(0)} MB before, peak ${(peakKb / 1024).toFixed(0)} MB (+${growthMb.toFixed(1)} MB)`,
    );

    // A token not in the file is asked of the conversation service (issued tokens live in its
    // database); with none running here, that question fails: UNAVAILABLE, still before the body is read.
    const unverifiable = {
      code: 'Unavailable',
      message: 'cannot verify the bearer token now: the conversation service is unavailable; try again shortly',
    };
    expect(answers.map(codeOf)).toEqual([
      { code: 'Unauthenticated', message: 'missing bearer token: send "Authorization: Bearer <token>"' },
      unverifiable,
      { code: 'Unauthenticated', message: 'missing bearer token: send "Authorization: Bearer <token>"' },
      { code: 'Unauthenticated', message: 'missing bearer token: send "Authorization: Bearer <token>"' },
      unverifiable,
      { code: 'Unauthenticated', message: 'missing bearer token: send "Authorization: Bearer <token>"' },
    ]);
    // Connect unary is HTTP 401 (503 for UNAVAILABLE); the streaming protocols answer 200 with the status inside.
    expect(answers.map((a) => a.status)).toEqual([401, 503, 200, 200, 503, 200]);
    for (const a of answers) {
      expect(a.answeredMs).toBeLessThan(1000);
      // The answer came long before the body was sent: it was not waited for.
      expect(a.sentAtAnswer).toBeLessThan(size / 2);
    }
    expect(growthMb).toBeLessThan(50);
  });

  it('does not invite the body of a refused `Expect: 100-continue` request, and does for an admitted one', async () => {
    const refused = await postH1(httpUrl, SEND, { 'content-type': 'application/proto', expect: '100-continue' }, 10 * MB);
    expect([refused.status, refused.continued, refused.sentAtAnswer]).toEqual([401, false, 0]);
    // Admitted: 100 Continue, then the body, then connect's answer (the conversation service is not there: UNAVAILABLE).
    const body = Buffer.from(toBinary(health.HealthCheckRequestSchema, create(health.HealthCheckRequestSchema, {})));
    const admitted = await postH1(httpUrl, CHECK, { 'content-type': 'application/proto', expect: '100-continue' }, body.length, body);
    expect([admitted.status, admitted.continued]).toEqual([200, true]);
  });

  it('keeps health checking and reflection open, for small bodies only', async () => {
    const client = createClient(health.Health, createConnectTransport({ baseUrl: httpUrl, httpVersion: '1.1' }));
    expect((await client.check({})).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    const header = Buffer.alloc(5);
    header.writeUInt32BE(8 * MB, 1);
    const big = await postH2(grpcUrl, CHECK, { 'content-type': 'application/grpc', te: 'trailers' }, 8 * MB + 5, header);
    expect(grpcStatusOf(big).code).toBe(Code.ResourceExhausted);
    expect(big.sentAtAnswer).toBeLessThan(4 * MB);
    const err = ConnectError.from(await client.check({ service: 'x'.repeat(70 * 1024) }).catch((e: unknown) => e));
    expect(err.code).toBe(Code.ResourceExhausted);
  });
});

describe('authenticated calls', () => {
  it('still take a large body within the limit (a 2 MB image), over HTTP/1.1 Connect and h2c gRPC', async () => {
    const png = await noisePng(840, 830);
    expect(png.byteLength).toBeGreaterThan(2 * 1000 * 1000);
    for (const protocol of ['connect-h1', 'grpc'] as const) {
      const alice = s.client(s.tokens.alice, protocol);
      const id = (await alice.createConversation({ cwd: workDir })).conversation!.id;
      const started = performance.now();
      const sent = await alice.sendMessage({ conversationId: id, text: 'a big picture', images: [{ mediaType: 'image/png', data: png }] });
      console.log(
        `${protocol}: SendMessage with a ${(png.byteLength / MB).toFixed(1)} MiB PNG through web-bff took ${(performance.now() - started).toFixed(0)} ms`,
      );
      expect(sent.message!.content.map((b) => b.block.case)).toEqual(['text', 'image']);
    }
  }, 60_000);

  it('answers INVALID_ARGUMENT to a body that does not parse: Connect protobuf and JSON, gRPC, gRPC-Web', async () => {
    const auth = { authorization: `Bearer ${s.tokens.alice}` };
    const truncated = Buffer.from([0x0a, 0x40, 0x61]);
    const answers = {
      connectProto: await postH1(s.bff.httpUrl, SEND, { ...auth, 'content-type': 'application/proto' }, truncated.length, truncated),
      connectJson: await postH1(s.bff.httpUrl, SEND, { ...auth, 'content-type': 'application/json' }, 12, Buffer.from('{"text": tru')),
      grpc: await postH2(s.bff.grpcUrl, SEND, { ...auth, 'content-type': 'application/grpc', te: 'trailers' }, 8, envelope(truncated)),
      grpcWeb: await postH1(s.bff.httpUrl, SEND, { ...auth, 'content-type': 'application/grpc-web+proto' }, 8, envelope(truncated)),
      connectStream: await postH2(
        s.bff.grpcUrl,
        WATCH,
        { ...auth, 'content-type': 'application/connect+json' },
        9,
        envelope(Buffer.from('{"x')),
      ),
    };
    for (const [name, a] of Object.entries(answers)) {
      const { code, message } = codeOf(a);
      expect([name, code]).toEqual([name, 'InvalidArgument']);
      expect([name, message]).toEqual([
        name,
        expect.stringMatching(
          /^request body is not a valid bedrock\.v1\.(SendMessageRequest|WatchConversationRequest): .+ \((protobuf binary|JSON)\)$/,
        ),
      ]);
    }
    expect(answers.connectProto.status).toBe(400);
    expect(answers.connectJson.status).toBe(400);
  });
});

describe('security headers', () => {
  const COMMON = { 'x-frame-options': 'DENY', 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' };

  it('on the UI: its page, a client route, an asset, a missing file', async () => {
    for (const path of ['/', '/c/some-conversation', '/assets/app.js', '/assets/missing.js']) {
      const res = await fetch(`${s.bff.httpUrl}${path}`);
      await res.arrayBuffer();
      const headers = Object.fromEntries(res.headers);
      expect([path, headers]).toEqual([
        path,
        expect.objectContaining({ ...COMMON, 'content-security-policy': UI_CONTENT_SECURITY_POLICY }),
      ]);
    }
    expect(UI_CONTENT_SECURITY_POLICY).toContain("default-src 'self'");
    expect(UI_CONTENT_SECURITY_POLICY).toContain("frame-ancestors 'none'");
    expect(UI_CONTENT_SECURITY_POLICY).toContain("connect-src 'self'");
    expect(UI_CONTENT_SECURITY_POLICY).toContain("img-src 'self' data: blob:");
    expect(UI_CONTENT_SECURITY_POLICY).not.toContain('unsafe-inline');
    expect(UI_CONTENT_SECURITY_POLICY).not.toContain('unsafe-eval');
  });

  it('on API answers, refused or served, on both listeners', async () => {
    const auth = { authorization: `Bearer ${s.tokens.alice}` };
    const list = Buffer.from([]);
    const answers = [
      await postH1(s.bff.httpUrl, '/bedrock.v1.ConversationService/ListConversations', { 'content-type': 'application/proto' }, 0, list),
      await postH1(
        s.bff.httpUrl,
        '/bedrock.v1.ConversationService/ListConversations',
        { ...auth, 'content-type': 'application/proto' },
        0,
        list,
      ),
      await postH2(
        s.bff.grpcUrl,
        '/bedrock.v1.ConversationService/ListConversations',
        { ...auth, 'content-type': 'application/grpc', te: 'trailers' },
        5,
        envelope(list),
      ),
    ];
    expect(answers.map((a) => a.status)).toEqual([401, 200, 200]);
    for (const a of answers) {
      expect(a.headers).toEqual(
        expect.objectContaining({ ...COMMON, 'content-security-policy': "default-src 'none'; frame-ancestors 'none'" }),
      );
    }
  });
});
