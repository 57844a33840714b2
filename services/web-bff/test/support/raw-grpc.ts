/**
 * A hand-rolled gRPC server-streaming call over node:http2 whose reading speed the test
 * controls: pausing the HTTP/2 stream stops flow-control window updates, so the server really
 * sees a slow client (Connect's and grpc-js's clients read ahead into memory).
 */
import http2 from 'node:http2';
import { fromBinary, toBinary, create, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';

export interface RawStreamResult<O extends DescMessage> {
  readonly messages: MessageShape<O>[];
  /** grpc-status, grpc-message and the other trailers (or headers, for a trailers-only answer). */
  readonly trailers: Record<string, string>;
}

export interface RawStreamOptions {
  /** Pause this long after every DATA chunk, ms. */
  readonly pauseMs: number;
  readonly headers?: Record<string, string>;
  /** Cancel the call after this long, ms (the result then has no grpc-status). */
  readonly deadlineMs: number;
}

export function rawServerStream<I extends DescMessage, O extends DescMessage>(
  baseUrl: string,
  path: string,
  input: I,
  output: O,
  request: MessageInitShape<I>,
  options: RawStreamOptions,
): Promise<RawStreamResult<O>> {
  return new Promise((resolve, reject) => {
    const session = http2.connect(baseUrl);
    session.on('error', reject);
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc+proto',
      te: 'trailers',
      ...options.headers,
    });
    const body = toBinary(input, create(input, request));
    const frame = Buffer.alloc(5 + body.length);
    frame.writeUInt32BE(body.length, 1);
    Buffer.from(body).copy(frame, 5);
    stream.end(frame);

    const messages: MessageShape<O>[] = [];
    let pending = Buffer.alloc(0);
    let trailers: Record<string, string> = {};
    const collect = (h: http2.IncomingHttpHeaders) => {
      for (const [k, v] of Object.entries(h)) if (typeof v === 'string' && !k.startsWith(':')) trailers[k] = decodeURIComponent(v);
    };
    stream.on('response', (headers) => {
      if (headers['grpc-status'] !== undefined) trailers = {};
      if (headers['grpc-status'] !== undefined) collect(headers);
    });
    stream.on('trailers', collect);
    stream.on('data', (chunk: Buffer) => {
      pending = Buffer.concat([pending, chunk]);
      while (pending.length >= 5) {
        const length = pending.readUInt32BE(1);
        if (pending.length < 5 + length) break;
        messages.push(fromBinary(output, pending.subarray(5, 5 + length)));
        pending = pending.subarray(5 + length);
      }
      stream.pause();
      setTimeout(() => stream.resume(), options.pauseMs);
    });
    const deadline = setTimeout(() => stream.close(http2.constants.NGHTTP2_CANCEL), options.deadlineMs);
    stream.on('error', () => undefined);
    stream.on('close', () => {
      clearTimeout(deadline);
      session.close();
      resolve({ messages, trailers });
    });
  });
}
