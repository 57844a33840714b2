/**
 * A raw gRPC server reflection client on node:http2 (no connect, no grpc-js): one
 * `ServerReflectionInfo` stream with the given requests, the answers decoded. Used to check what
 * a port reveals to a caller without credentials.
 */
import { connect } from 'node:http2';
import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import { reflection } from '@bedrock/contracts';
import { envelope, grpcStatusOf } from './raw-rpc.ts';

export type ReflectionRequestInit = MessageInitShape<typeof reflection.ServerReflectionRequestSchema>['messageRequest'];

/** What one reflection answer says, flattened. */
export interface ReflectionAnswer {
  /** list_services: the service names. */
  readonly services?: string[];
  /** A file answer: the names of the files it holds (the file first, then its imports). */
  readonly files?: string[];
  /** An error answer: its gRPC code. */
  readonly errorCode?: number;
}

/** Sends `requests` on one stream (v1, or v1alpha) to an h2c gRPC port and decodes every answer. */
export async function rawReflection(
  baseUrl: string,
  requests: ReflectionRequestInit[],
  version: 'v1' | 'v1alpha' = 'v1',
): Promise<{ status: number; answers: ReflectionAnswer[] }> {
  const session = connect(baseUrl);
  session.on('error', () => undefined);
  try {
    const stream = session.request({
      ':method': 'POST',
      ':path': `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    const chunks: Buffer[] = [];
    let headers: Record<string, string | string[] | undefined> = {};
    let trailers: Record<string, string | string[] | undefined> = {};
    stream.on('response', (h) => (headers = h));
    stream.on('trailers', (t) => (trailers = t));
    stream.on('data', (c: Buffer) => chunks.push(c));
    const done = new Promise<void>((resolve, reject) => {
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    for (const messageRequest of requests) {
      stream.write(
        envelope(toBinary(reflection.ServerReflectionRequestSchema, create(reflection.ServerReflectionRequestSchema, { messageRequest }))),
      );
    }
    stream.end();
    await done;
    const body = Buffer.concat(chunks);
    const answers: ReflectionAnswer[] = [];
    for (let offset = 0; offset + 5 <= body.length;) {
      const length = body.readUInt32BE(offset + 1);
      const r = fromBinary(reflection.ServerReflectionResponseSchema, body.subarray(offset + 5, offset + 5 + length));
      offset += 5 + length;
      const m = r.messageResponse;
      if (m.case === 'listServicesResponse') answers.push({ services: m.value.service.map((s) => s.name) });
      else if (m.case === 'fileDescriptorResponse')
        answers.push({ files: m.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name) });
      else if (m.case === 'errorResponse') answers.push({ errorCode: m.value.errorCode });
      else answers.push({});
    }
    return { status: grpcStatusOf({ headers, trailers }).code, answers };
  } finally {
    session.close();
  }
}
