import { execFile } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, createFileRegistry, fromBinary, toBinary } from '@bufbuild/protobuf';
import type { DescService, MessageInitShape } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema, file_google_protobuf_descriptor } from '@bufbuild/protobuf/wkt';
import type { FileDescriptorProto } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import grpc from '@grpc/grpc-js';
import { ConversationService, ToolRunnerService, health, reflection as pb } from '@bedrock/contracts';
import { startGrpcServer } from './grpc-server.ts';
import type { GrpcServer } from './grpc-server.ts';
import { createHealth, registerHealth } from './health.ts';
import { createLogger } from './logger.ts';
import { registerReflection } from './reflection.ts';

const logger = createLogger({ service: 'test', level: 'silent' });
const execFileAsync = promisify(execFile);
const BUF = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../node_modules/.bin/buf');

/**
 * A hand-built file with extensions (the generated contracts have none), so the
 * extension queries are tested on real data: `extend Ping { int32 hops = 150; }` and
 * `extend google.protobuf.MethodOptions { string tag = 50001; }`.
 */
function extensionFixture(): DescService {
  const proto = create(FileDescriptorProtoSchema, {
    name: 'test/ext.proto',
    package: 'test',
    syntax: 'proto2',
    dependency: ['google/protobuf/descriptor.proto'],
    messageType: [{ name: 'Ping', extensionRange: [{ start: 100, end: 201 }] }],
    extension: [
      { name: 'hops', number: 150, label: 1, type: 5, extendee: '.test.Ping' },
      { name: 'tag', number: 50001, label: 1, type: 9, extendee: '.google.protobuf.MethodOptions' },
    ],
    service: [{ name: 'PingService', method: [{ name: 'Ping', inputType: '.test.Ping', outputType: '.test.Ping' }] }],
  });
  const registry = createFileRegistry(proto, (name) =>
    name === file_google_protobuf_descriptor.proto.name ? file_google_protobuf_descriptor : undefined,
  );
  const service = registry.getService('test.PingService');
  if (!service) throw new Error('fixture');
  return service;
}

type Request = MessageInitShape<typeof pb.ServerReflectionRequestSchema>;

/** Sends requests on one ServerReflectionInfo stream through grpc-js and collects the answers. */
async function reflect(address: string, requests: Request[], version: 'v1' | 'v1alpha' = 'v1'): Promise<pb.ServerReflectionResponse[]> {
  const client = new grpc.Client(address, grpc.credentials.createInsecure());
  try {
    const call = client.makeBidiStreamRequest(
      `/grpc.reflection.${version}.ServerReflection/ServerReflectionInfo`,
      (req: Request) => Buffer.from(toBinary(pb.ServerReflectionRequestSchema, create(pb.ServerReflectionRequestSchema, req))),
      (bytes: Buffer) => fromBinary(pb.ServerReflectionResponseSchema, bytes),
    );
    const responses: pb.ServerReflectionResponse[] = [];
    const done = new Promise<void>((resolve, reject) => {
      call.on('data', (res: pb.ServerReflectionResponse) => responses.push(res));
      call.on('error', reject);
      call.on('end', resolve);
    });
    for (const req of requests) call.write(req);
    call.end();
    await done;
    return responses;
  } finally {
    client.close();
  }
}

function fileNames(res: pb.ServerReflectionResponse | undefined): string[] {
  if (res?.messageResponse.case !== 'fileDescriptorResponse') throw new Error(`not a file response: ${res?.messageResponse.case}`);
  return res.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b).name);
}

function errorOf(res: pb.ServerReflectionResponse | undefined): { errorCode: number; errorMessage: string } {
  if (res?.messageResponse.case !== 'errorResponse') throw new Error(`not an error response: ${res?.messageResponse.case}`);
  return { errorCode: res.messageResponse.value.errorCode, errorMessage: res.messageResponse.value.errorMessage };
}

describe('registerReflection', () => {
  let server: GrpcServer;
  let address: string;
  const pingService = extensionFixture();

  beforeAll(async () => {
    server = await startGrpcServer({
      routes: (router) => {
        registerHealth(router, createHealth());
        registerReflection(router, [ConversationService, ToolRunnerService, health.Health, pingService]);
      },
      port: 0,
      host: '127.0.0.1',
      logger,
    });
    address = `127.0.0.1:${server.port}`;
  });
  afterAll(() => server.close(0));

  it('lists the given services and the reflection services', async () => {
    const [res] = await reflect(address, [{ host: 'h', messageRequest: { case: 'listServices', value: '' } }]);
    expect(res?.validHost).toBe('h');
    expect(res?.originalRequest?.messageRequest.case).toBe('listServices');
    if (res?.messageResponse.case !== 'listServicesResponse') throw new Error('wrong answer');
    expect(res.messageResponse.value.service.map((s) => s.name)).toEqual([
      'bedrock.internal.v1.ToolRunnerService',
      'bedrock.v1.ConversationService',
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
      'test.PingService',
    ]);
  });

  it('answers a service symbol with its file and every transitive dependency, enough to rebuild it', async () => {
    const [res] = await reflect(address, [{ messageRequest: { case: 'fileContainingSymbol', value: 'bedrock.v1.ConversationService' } }]);
    const names = fileNames(res);
    expect(names[0]).toBe('bedrock/v1/conversation_service.proto');
    expect(new Set(names)).toEqual(
      new Set([
        'bedrock/v1/conversation_service.proto',
        'bedrock/v1/events.proto',
        'bedrock/v1/types.proto',
        'google/protobuf/timestamp.proto',
      ]),
    );
    // A client-side registry built only from the answer resolves the whole service.
    if (res?.messageResponse.case !== 'fileDescriptorResponse') throw new Error('wrong answer');
    const received = new Map(
      res.messageResponse.value.fileDescriptorProto.map((b) => fromBinary(FileDescriptorProtoSchema, b)).map((f) => [f.name, f] as const),
    );
    const root = received.get('bedrock/v1/conversation_service.proto') as FileDescriptorProto;
    const rebuilt = createFileRegistry(root, (name) => received.get(name)).getService('bedrock.v1.ConversationService');
    expect(rebuilt?.methods.map((m) => [m.name, m.methodKind, m.input.typeName])).toEqual(
      ConversationService.methods.map((m) => [m.name, m.methodKind, m.input.typeName]),
    );
  });

  it('finds methods, messages, nested and imported types, enums, enum values and fields', async () => {
    const symbols = [
      'bedrock.v1.ConversationService.WatchConversation',
      'bedrock.v1.ConversationState',
      '.bedrock.v1.Mode',
      'grpc.health.v1.HealthCheckResponse.ServingStatus',
      'grpc.health.v1.HealthCheckResponse.SERVICE_UNKNOWN',
      'grpc.health.v1.HealthCheckRequest.service',
      'google.protobuf.Timestamp',
      'bedrock.internal.v1.ToolRunnerService',
      'test.hops',
    ];
    const responses = await reflect(
      address,
      symbols.map((value) => ({ messageRequest: { case: 'fileContainingSymbol', value } })),
    );
    expect(responses.map((r) => fileNames(r)[0])).toEqual([
      'bedrock/v1/conversation_service.proto',
      'bedrock/v1/types.proto',
      'bedrock/v1/types.proto',
      'grpc/health/v1/health.proto',
      'grpc/health/v1/health.proto',
      'grpc/health/v1/health.proto',
      'google/protobuf/timestamp.proto',
      'bedrock/internal/v1/tool_runner_service.proto',
      'test/ext.proto',
    ]);
  });

  it('answers file_by_filename and reports unknown names with NOT_FOUND on the same stream', async () => {
    const responses = await reflect(address, [
      { messageRequest: { case: 'fileByFilename', value: 'bedrock/v1/types.proto' } },
      { messageRequest: { case: 'fileByFilename', value: 'nope.proto' } },
      { messageRequest: { case: 'fileContainingSymbol', value: 'bedrock.v1.Nope' } },
      { messageRequest: { case: undefined } },
    ]);
    expect(fileNames(responses[0])).toEqual(['bedrock/v1/types.proto', 'google/protobuf/timestamp.proto']);
    expect(errorOf(responses[1])).toEqual({ errorCode: Code.NotFound, errorMessage: 'file "nope.proto" not found' });
    expect(errorOf(responses[2]).errorCode).toBe(5);
    expect(errorOf(responses[3]).errorCode).toBe(Code.InvalidArgument);
  });

  it('answers the extension queries, including for types without extensions', async () => {
    const responses = await reflect(address, [
      { messageRequest: { case: 'allExtensionNumbersOfType', value: 'test.Ping' } },
      { messageRequest: { case: 'allExtensionNumbersOfType', value: 'bedrock.v1.ConversationState' } },
      { messageRequest: { case: 'allExtensionNumbersOfType', value: 'google.protobuf.MethodOptions' } },
      { messageRequest: { case: 'allExtensionNumbersOfType', value: 'test.Nope' } },
      { messageRequest: { case: 'fileContainingExtension', value: { containingType: 'test.Ping', extensionNumber: 150 } } },
      { messageRequest: { case: 'fileContainingExtension', value: { containingType: 'test.Ping', extensionNumber: 151 } } },
      { messageRequest: { case: 'fileContainingExtension', value: { containingType: 'test.Nope', extensionNumber: 1 } } },
    ]);
    const numbers = responses
      .slice(0, 3)
      .map((r) => (r.messageResponse.case === 'allExtensionNumbersResponse' ? r.messageResponse.value : undefined));
    expect(numbers.map((n) => [n?.baseTypeName, n?.extensionNumber])).toEqual([
      ['test.Ping', [150]],
      ['bedrock.v1.ConversationState', []],
      ['google.protobuf.MethodOptions', [50001]],
    ]);
    expect(errorOf(responses[3]).errorCode).toBe(Code.NotFound);
    expect(fileNames(responses[4])).toEqual(['test/ext.proto', 'google/protobuf/descriptor.proto']);
    expect(errorOf(responses[5])).toEqual({ errorCode: Code.NotFound, errorMessage: 'extension 151 of "test.Ping" not found' });
    expect(errorOf(responses[6]).errorMessage).toBe('message type "test.Nope" not found');
  });

  it('serves the same answers on grpc.reflection.v1alpha', async () => {
    const [list, file] = await reflect(
      address,
      [
        { messageRequest: { case: 'listServices', value: '*' } },
        { messageRequest: { case: 'fileContainingSymbol', value: 'grpc.health.v1.Health' } },
      ],
      'v1alpha',
    );
    expect(list?.messageResponse.case === 'listServicesResponse' && list.messageResponse.value.service.length).toBe(6);
    expect(fileNames(file)).toEqual(['grpc/health/v1/health.proto']);
  });

  it('lets buf curl list methods and call a method it only knows through reflection', async () => {
    const { stdout } = await execFileAsync(BUF, ['curl', '--http2-prior-knowledge', '--list-methods', server.url]);
    const methods = stdout.trim().split('\n');
    expect(methods).toEqual(
      expect.arrayContaining([
        'bedrock.v1.ConversationService/WatchConversation',
        'bedrock.internal.v1.ToolRunnerService/' + (ToolRunnerService.methods[0]?.name ?? ''),
        'grpc.health.v1.Health/Check',
        'grpc.health.v1.Health/Watch',
        'grpc.reflection.v1.ServerReflection/ServerReflectionInfo',
        'test.PingService/Ping',
      ]),
    );
    const check = await execFileAsync(BUF, [
      'curl',
      '--http2-prior-knowledge',
      '--protocol',
      'grpc',
      '-d',
      '{"service":""}',
      `${server.url}/grpc.health.v1.Health/Check`,
    ]);
    expect(JSON.parse(check.stdout)).toEqual({ status: 'SERVING' });
  }, 60_000);
});

// Keeps the fixture type honest: the proto built above must round-trip through the wire format.
describe('extension fixture', () => {
  it('is a valid FileDescriptorProto', () => {
    const file = extensionFixture().file.proto as FileDescriptorProto;
    expect(fromBinary(FileDescriptorProtoSchema, toBinary(FileDescriptorProtoSchema, file)).extension).toHaveLength(2);
  });
});
