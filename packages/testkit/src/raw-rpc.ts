/**
 * Reading raw RPC answers in tests that speak the wire protocols by hand (gRPC, gRPC-Web,
 * Connect streams): the status of a gRPC answer and the last frame of an enveloped body.
 */

/** Headers and trailers of a raw HTTP answer, lower-case names. */
export interface RawHeaders {
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly trailers: Readonly<Record<string, string | string[] | undefined>>;
}

/** grpc-status and grpc-message, from the trailers or a trailers-only answer's headers. */
export function grpcStatusOf(a: RawHeaders): { code: number; message: string } {
  const t = a.trailers['grpc-status'] !== undefined ? a.trailers : a.headers;
  return { code: Number(t['grpc-status']), message: decodeURIComponent(String(t['grpc-message'] ?? '')) };
}

/** The last frame (gRPC-Web trailers, Connect end-of-stream) of an enveloped body: 1 flag byte, 4 length bytes, data. */
export function lastFrame(body: Buffer): { flags: number; data: string } {
  let offset = 0;
  let last = { flags: -1, data: '' };
  while (offset + 5 <= body.length) {
    const length = body.readUInt32BE(offset + 1);
    last = { flags: body[offset]!, data: body.subarray(offset + 5, offset + 5 + length).toString('utf8') };
    offset += 5 + length;
  }
  return last;
}

/** One enveloped message (gRPC, gRPC-Web, Connect streams): 1 flag byte, 4 length bytes, data. */
export function envelope(data: Uint8Array, flags = 0): Buffer {
  const frame = Buffer.alloc(5 + data.byteLength);
  frame[0] = flags;
  frame.writeUInt32BE(data.byteLength, 1);
  Buffer.from(data).copy(frame, 5);
  return frame;
}
