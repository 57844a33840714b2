/**
 * Input the conversation service checks beyond shapes and sizes, against the real service:
 * SendMessage decodes every image (a file that is not the image it claims is INVALID_ARGUMENT
 * and nothing is stored), CreateConversation needs an existing directory as its cwd, and a
 * request body that does not parse is INVALID_ARGUMENT on the service's own gRPC port.
 */
import http2 from 'node:http2';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { deflateSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { ConnectError } from '@connectrpc/connect';
import { StateKind, USER_HEADER } from '@bedrock/contracts';
import { serviceCredentialHeaders } from '@bedrock/platform/server';
import sharp from 'sharp';
import { checkImageDecodes } from '../src/api/images.ts';
import { LIMITS } from '../src/api/input-limits.ts';
import { text } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';
import { noisePng, tinyJpeg, tinyPng } from './support/images.ts';

let h: Harness;
let dir: string;
beforeAll(async () => {
  h = await startHarness({ label: 'inputcheck' });
  dir = await mkdtemp(join(tmpdir(), 'bedrock-input-'));
});
afterAll(async () => {
  await h?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const expectInvalid = (err: ConnectError, pattern: RegExp) => {
  expect(`${Code[err.code]}: ${err.rawMessage}`).toMatch(new RegExp(`^InvalidArgument: ${pattern.source}`));
};

/** Everything stored about a conversation: API view, row, messages, notification stream. */
async function stored(id: string) {
  const got = await h.get(id);
  const row = await h.pool.query('SELECT state, version, notify_seq, message_seq, updated_at FROM conversations WHERE id = $1', [id]);
  const messages = await h.pool.query('SELECT * FROM messages WHERE conversation_id = $1 ORDER BY sequence', [id]);
  return { got, row: row.rows[0], messages: messages.rows, stream: await h.notifications(id) };
}

/** A PNG whose header claims `width` × `height` pixels, with (almost) no pixel data. */
function pngClaiming(width: number, height: number): Uint8Array {
  const crcTable = Array.from({ length: 256 }, (_, n) => {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    return c >>> 0;
  });
  const crc32 = (b: Buffer) => {
    let c = 0xffffffff;
    for (const byte of b) c = crcTable[(c ^ byte) & 0xff]! ^ (c >>> 8);
    return (c ^ 0xffffffff) >>> 0;
  };
  const chunk = (type: string, data: Buffer) => {
    const typed = Buffer.concat([Buffer.from(type, 'latin1'), data]);
    const out = Buffer.alloc(8 + data.length + 4);
    out.writeUInt32BE(data.length, 0);
    typed.copy(out, 4);
    out.writeUInt32BE(crc32(typed), 8 + data.length);
    return out;
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8; // bit depth
  ihdr[9] = 2; // RGB
  return new Uint8Array(
    Buffer.concat([
      Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
      chunk('IHDR', ihdr),
      chunk('IDAT', deflateSync(Buffer.alloc(16))),
      chunk('IEND', Buffer.alloc(0)),
    ]),
  );
}

/**
 * A real, decodable PNG of `width` × `height` one-bit grey pixels, all black: a few kilobytes
 * that take libvips over a second of CPU to decode at 100 megapixels.
 */
function bigPng(width: number, height: number): Uint8Array {
  const row = 1 + Math.ceil(width / 8);
  const raw = Buffer.alloc(row * height); // filter 0, every pixel 0
  const idat = deflateSync(raw, { level: 9 });
  const header = pngClaiming(width, height);
  // pngClaiming's IHDR (8-bit RGB) with bit depth 1, grey; then the real IDAT and IEND.
  const ihdr = Buffer.from(header.subarray(0, 33));
  ihdr[24] = 1;
  ihdr[25] = 0;
  ihdr.writeUInt32BE(crc(ihdr.subarray(12, 29)), 29);
  const idatChunk = Buffer.alloc(12 + idat.length);
  idatChunk.writeUInt32BE(idat.length, 0);
  idatChunk.write('IDAT', 4, 'latin1');
  idat.copy(idatChunk, 8);
  idatChunk.writeUInt32BE(crc(idatChunk.subarray(4, 8 + idat.length)), 8 + idat.length);
  const iend = Buffer.from([0, 0, 0, 0, 0x49, 0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82]);
  return new Uint8Array(Buffer.concat([ihdr, idatChunk, iend]));
}

function crc(b: Buffer): number {
  let c = 0xffffffff;
  for (const byte of b) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

describe('images are decoded at SendMessage', () => {
  it('accepts real PNG, JPEG, GIF and WebP images', async () => {
    const id = await h.createConversation('alice', dir);
    const solid = sharp({ create: { width: 8, height: 8, channels: 3, background: '#336699' } });
    const images = [
      { mediaType: 'image/png', data: await tinyPng() },
      { mediaType: 'image/jpeg', data: await tinyJpeg() },
      { mediaType: 'image/gif', data: new Uint8Array(await solid.clone().gif().toBuffer()) },
      { mediaType: 'image/webp', data: new Uint8Array(await solid.clone().webp().toBuffer()) },
    ];
    const sent = await h.client().sendMessage({ conversationId: id, text: 'four images', images });
    expect(sent.message!.content.map((b) => b.block.case)).toEqual(['text', 'image', 'image', 'image', 'image']);
  });

  it('refuses an image that is not what it claims or does not decode, naming the image, and stores nothing', async () => {
    const id = await h.createConversation('alice', dir);
    await h.client().sendMessage({ conversationId: id, text: 'first' });
    await h.respond(await h.llmJob(id), { content: [text('ok')] });
    await h.waitState(id, StateKind.IDLE);
    const before = await stored(id);
    const jobsBefore = h.llmJobsOf(id).length;

    const png = await tinyPng();
    const jpeg = await tinyJpeg();
    const truncated = (await noisePng(64, 64)).subarray(0, 4000);
    const send = (images: { mediaType: string; data: Uint8Array }[]) =>
      rpcError(h.client().sendMessage({ conversationId: id, text: 'look', images }));

    // Image 2 is a JPEG declared as PNG.
    expectInvalid(
      await send([
        { mediaType: 'image/png', data: png },
        { mediaType: 'image/png', data: jpeg },
      ]),
      /image 2: the data is not a valid image\/png \(it decodes as jpeg\)$/,
    );
    expectInvalid(
      await send([{ mediaType: 'image/jpeg', data: png }]),
      /image 1: the data is not a valid image\/jpeg \(it decodes as png\)$/,
    );
    // Not an image at all.
    expectInvalid(
      await send([{ mediaType: 'image/png', data: new TextEncoder().encode('definitely not a picture') }]),
      /image 1: the data is not a valid image\/png: it does not decode \(.+\)$/,
    );
    // A PNG cut short: its header reads, its pixels do not.
    expectInvalid(
      await send([
        { mediaType: 'image/jpeg', data: jpeg },
        { mediaType: 'image/png', data: truncated },
      ]),
      /image 2: the data is not a valid image\/png: it does not decode \(.+\)$/,
    );
    // SVG is not one of the accepted formats, whatever it is declared as.
    const svg = new TextEncoder().encode('<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>');
    expectInvalid(
      await send([{ mediaType: 'image/webp', data: svg }]),
      /image 1: the data is not a valid image\/webp: it does not decode \(not a PNG, JPEG, GIF or WebP header\)$/,
    );
    // A small file claiming a huge image is refused before decoding.
    expectInvalid(
      await send([{ mediaType: 'image/png', data: pngClaiming(20_000, 20_000) }]),
      /image 1 is 20000×20000 pixels; the limit is 100,000,000 pixels$/,
    );

    expect(await stored(id)).toEqual(before);
    expect(h.llmJobsOf(id)).toHaveLength(jobsBefore);
    expect(await h.stateOf(id)).toBe(StateKind.IDLE);
  });

  it('costs little: a 1 MB PNG (measured, printed)', async () => {
    const png = await noisePng(600, 580);
    expect(png.byteLength).toBeGreaterThan(1_000_000);
    await checkImageDecodes(0, 'image/png', png); // warm-up (libvips loads its PNG code once)
    const runs = 5;
    const started = performance.now();
    for (let i = 0; i < runs; i++) await checkImageDecodes(0, 'image/png', png);
    const checkMs = (performance.now() - started) / runs;

    const id = await h.createConversation('alice', dir);
    const sendStarted = performance.now();
    await h.client().sendMessage({ conversationId: id, text: 'a big one', images: [{ mediaType: 'image/png', data: png }] });
    const sendMs = performance.now() - sendStarted;
    console.log(
      `image check of a ${(png.byteLength / 1e6).toFixed(2)} MB PNG (600x580, random pixels): ${checkMs.toFixed(1)} ms per image (mean of ${runs}); whole SendMessage with it: ${sendMs.toFixed(0)} ms`,
    );
    // Generous bound for a shared 2-core machine; the figure above is the measurement.
    expect(checkMs).toBeLessThan(1000);
  });

  it('refuses 20 images of 100 megapixels each in under a second, from their headers, decoding none (memory flat)', async () => {
    const png = bigPng(10_000, 10_000);
    // It is a real image: libvips reads its header as such (its pixels are not decoded here).
    expect(await sharp(png, { limitInputPixels: false }).metadata()).toMatchObject({ format: 'png', width: 10_000, height: 10_000 });
    const id = await h.createConversation('alice', dir);
    const images = Array.from({ length: 20 }, () => ({ mediaType: 'image/png', data: png }));
    const rssBefore = process.memoryUsage().rss;
    const started = performance.now();
    const err = await rpcError(h.client().sendMessage({ conversationId: id, text: 'twenty big ones', images }));
    const ms = performance.now() - started;
    const rssAfter = process.memoryUsage().rss;
    console.log(
      `20 × 100-Mpx PNGs (${(png.byteLength / 1024).toFixed(0)} KiB each): refused in ${ms.toFixed(0)} ms; RSS ${(rssBefore / 2 ** 20).toFixed(0)} → ${(rssAfter / 2 ** 20).toFixed(0)} MiB`,
    );
    expectInvalid(
      err,
      /the images of this message have 2,000,000,000 pixels together; the limit is 50,000,000 pixels per message \(image 1: 10000×10000, /,
    );
    expect(ms).toBeLessThan(1000);
    expect(rssAfter - rssBefore).toBeLessThan(64 * 2 ** 20);
    expect(h.llmJobsOf(id)).toHaveLength(0);
  });

  it('keeps the pixel limit in LIMITS', () => {
    expect(LIMITS.maxImagePixels).toBe(100_000_000);
  });
});

describe('the working directory must exist', () => {
  it('refuses a cwd that does not exist, a file, and a path through a file, naming the path', async () => {
    const c = h.client();
    const missing = join(dir, 'no-such-dir');
    expectInvalid(
      await rpcError(c.createConversation({ cwd: missing })),
      new RegExp(`cwd "${missing}" does not exist: give the absolute path of an existing directory$`),
    );
    const file = join(dir, 'a-file.txt');
    await writeFile(file, 'not a directory\n');
    expectInvalid(await rpcError(c.createConversation({ cwd: file })), new RegExp(`cwd "${file}" is not a directory`));
    expectInvalid(
      await rpcError(c.createConversation({ cwd: join(file, 'below') })),
      new RegExp(`cwd "${file}/below" does not exist \\(a part of the path is not a directory\\)`),
    );
    // Nothing was created.
    const listed = await c.listConversations({ pageSize: 200 });
    expect(listed.conversations.filter((x) => x.cwd.startsWith(dir) && x.cwd !== dir)).toEqual([]);
  });

  it('creates a conversation in an existing directory', async () => {
    const { conversation } = await h.client().createConversation({ cwd: dir });
    expect(conversation!.cwd).toBe(dir);
  });
});

describe('a request body that does not parse, on the gRPC port', () => {
  const path = '/bedrock.v1.ConversationService/SendMessage';
  function post(
    headers: Record<string, string>,
    body: Buffer,
  ): Promise<{ status: number; headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; body: string }> {
    return new Promise((resolve, reject) => {
      const session = http2.connect(h.service.grpcUrl);
      session.on('error', reject);
      const stream = session.request({
        ':method': 'POST',
        ':path': path,
        ...serviceCredentialHeaders(h.services.tokens['web-bff']!),
        [USER_HEADER]: 'alice',
        ...headers,
      });
      let head: http2.IncomingHttpHeaders = {};
      let trailers: http2.IncomingHttpHeaders = {};
      const chunks: Buffer[] = [];
      stream.on('response', (x) => (head = x));
      stream.on('trailers', (x) => (trailers = x));
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('error', reject);
      stream.on('close', () => {
        session.close();
        resolve({ status: Number(head[':status']), headers: head, trailers, body: Buffer.concat(chunks).toString() });
      });
      stream.end(body);
    });
  }
  const TRUNCATED = Buffer.from([0x0a, 0x40, 0x61]);

  it('answers INVALID_ARGUMENT naming the message type: gRPC, Connect protobuf and Connect JSON', async () => {
    const frame = Buffer.alloc(5 + TRUNCATED.length);
    frame.writeUInt32BE(TRUNCATED.length, 1);
    TRUNCATED.copy(frame, 5);
    const grpc = await post({ 'content-type': 'application/grpc', te: 'trailers' }, frame);
    const status = grpc.trailers['grpc-status'] ?? grpc.headers['grpc-status'];
    const message = decodeURIComponent(String(grpc.trailers['grpc-message'] ?? grpc.headers['grpc-message']));
    expect([status, message]).toEqual([
      '3',
      expect.stringMatching(/^request body is not a valid bedrock\.v1\.SendMessageRequest: .+ \(protobuf binary\)$/),
    ]);

    const proto = await post({ 'content-type': 'application/proto' }, TRUNCATED);
    expect(proto.status).toBe(400);
    expect(JSON.parse(proto.body)).toEqual({
      code: 'invalid_argument',
      message: expect.stringMatching(/^request body is not a valid bedrock\.v1\.SendMessageRequest: /),
    });

    const json = await post({ 'content-type': 'application/json' }, Buffer.from('{"conversationId": "x", "text": '));
    expect(json.status).toBe(400);
    expect(JSON.parse(json.body)).toEqual({
      code: 'invalid_argument',
      message: expect.stringMatching(/^request body is not a valid bedrock\.v1\.SendMessageRequest: .+ \(JSON\)$/),
    });
  });
});
