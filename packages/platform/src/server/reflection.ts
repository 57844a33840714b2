import { clone, create, createFileRegistry, toBinary } from '@bufbuild/protobuf';
import type { DescEnum, DescFile, DescMessage, DescMethodBiDiStreaming, DescService, MessageInitShape } from '@bufbuild/protobuf';
import { FileDescriptorProtoSchema } from '@bufbuild/protobuf/wkt';
import type { FileDescriptorProto } from '@bufbuild/protobuf/wkt';
import { Code } from '@connectrpc/connect';
import type { ConnectRouter } from '@connectrpc/connect';
import { reflection as pb } from '@bedrock/contracts';

/** Options of {@link registerReflection}. */
export interface ReflectionOptions {
  /**
   * Also serve the identical pre-standard `grpc.reflection.v1alpha.ServerReflection`, which
   * older tools (grpc_cli, some GUI clients) still ask for. Default true.
   */
  v1alpha?: boolean;
}

/**
 * Serves gRPC server reflection (`grpc.reflection.v1.ServerReflection`) for `services`, so
 * `buf curl`, grpcurl and GUI clients can call the server without local .proto files.
 * The reflection service itself is listed too; pass `health.Health` if it is served.
 * Every file answer holds the file's FileDescriptorProto first, then all its transitive
 * dependencies, so a client can build descriptors from one response.
 */
export function registerReflection(router: ConnectRouter, services: DescService[], options: ReflectionOptions = {}): void {
  const served: DescService[] = [pb.ServerReflection];
  if (options.v1alpha ?? true) served.push(v1alphaService());
  const index = buildIndex([...services, ...served]);

  for (const service of served) {
    const method = service.methods[0] as DescMethodBiDiStreaming | undefined;
    if (method?.methodKind !== 'bidi_streaming') throw new Error(`${service.typeName} is not the reflection service`);
    // The v1alpha messages are wire-identical to v1, so one implementation serves both;
    // only the response schema differs.
    router.rpc(method, async function* (requests) {
      for await (const request of requests) {
        yield create(method.output, answer(index, request as pb.ServerReflectionRequest) as MessageInitShape<DescMessage>);
      }
    });
  }
}

interface ReflectionIndex {
  services: string[];
  /** By proto file name, e.g. `bedrock/v1/types.proto`. */
  files: Map<string, DescFile>;
  /** Fully-qualified names of services, methods, messages, fields, oneofs, enums, enum values and extensions. */
  symbols: Map<string, DescFile>;
  /** Message name → extension field number → declaring file. */
  extensions: Map<string, Map<number, DescFile>>;
  messages: Set<string>;
  /** Serialized FileDescriptorProtos, computed once per file. */
  bytes: Map<DescFile, Uint8Array>;
}

function buildIndex(services: DescService[]): ReflectionIndex {
  const index: ReflectionIndex = {
    services: [...new Set(services.map((s) => s.typeName))].sort(),
    files: new Map(),
    symbols: new Map(),
    extensions: new Map(),
    messages: new Set(),
    bytes: new Map(),
  };
  const addMessage = (file: DescFile, message: DescMessage): void => {
    index.symbols.set(message.typeName, file);
    index.messages.add(message.typeName);
    for (const field of message.fields) index.symbols.set(`${message.typeName}.${field.name}`, file);
    for (const oneof of message.oneofs) index.symbols.set(`${message.typeName}.${oneof.name}`, file);
    message.nestedMessages.forEach((m) => addMessage(file, m));
    message.nestedEnums.forEach((e) => addEnum(file, e));
    message.nestedExtensions.forEach((x) => addExtension(file, x));
  };
  const addEnum = (file: DescFile, e: DescEnum): void => {
    index.symbols.set(e.typeName, file);
    // Enum values are scoped as siblings of their enum (C++ rules), e.g. `pkg.SERVING`.
    const scope = e.typeName.slice(0, Math.max(0, e.typeName.lastIndexOf('.')));
    for (const value of e.values) index.symbols.set(scope ? `${scope}.${value.name}` : value.name, file);
  };
  const addExtension = (file: DescFile, x: DescFile['extensions'][number]): void => {
    index.symbols.set(x.typeName, file);
    let byNumber = index.extensions.get(x.extendee.typeName);
    if (!byNumber) index.extensions.set(x.extendee.typeName, (byNumber = new Map()));
    byNumber.set(x.number, file);
  };
  const addFile = (file: DescFile): void => {
    const name = file.proto.name;
    if (index.files.has(name)) return;
    index.files.set(name, file);
    file.dependencies.forEach(addFile);
    for (const service of file.services) {
      index.symbols.set(service.typeName, file);
      for (const method of service.methods) index.symbols.set(`${service.typeName}.${method.name}`, file);
    }
    file.messages.forEach((m) => addMessage(file, m));
    file.enums.forEach((e) => addEnum(file, e));
    file.extensions.forEach((x) => addExtension(file, x));
  };
  for (const service of services) addFile(service.file);
  return index;
}

type Response = MessageInitShape<typeof pb.ServerReflectionResponseSchema>;

function answer(index: ReflectionIndex, request: pb.ServerReflectionRequest): Response {
  const base = { validHost: request.host, originalRequest: request };
  const error = (code: Code, message: string): Response => ({
    ...base,
    // Connect's Code values are the gRPC status codes.
    messageResponse: { case: 'errorResponse', value: { errorCode: code, errorMessage: message } },
  });
  const files = (file: DescFile | undefined, what: string): Response =>
    file
      ? { ...base, messageResponse: { case: 'fileDescriptorResponse', value: { fileDescriptorProto: withDependencies(index, file) } } }
      : error(Code.NotFound, `${what} not found`);

  const req = request.messageRequest;
  switch (req.case) {
    case 'listServices':
      return { ...base, messageResponse: { case: 'listServicesResponse', value: { service: index.services.map((name) => ({ name })) } } };
    case 'fileByFilename':
      return files(index.files.get(req.value), `file "${req.value}"`);
    case 'fileContainingSymbol': {
      const symbol = req.value.replace(/^\./, '');
      return files(index.symbols.get(symbol), `symbol "${symbol}"`);
    }
    case 'fileContainingExtension': {
      const type = req.value.containingType.replace(/^\./, '');
      if (!index.messages.has(type)) return error(Code.NotFound, `message type "${type}" not found`);
      return files(index.extensions.get(type)?.get(req.value.extensionNumber), `extension ${req.value.extensionNumber} of "${type}"`);
    }
    case 'allExtensionNumbersOfType': {
      const type = req.value.replace(/^\./, '');
      if (!index.messages.has(type)) return error(Code.NotFound, `message type "${type}" not found`);
      const numbers = [...(index.extensions.get(type)?.keys() ?? [])].sort((a, b) => a - b);
      return { ...base, messageResponse: { case: 'allExtensionNumbersResponse', value: { baseTypeName: type, extensionNumber: numbers } } };
    }
    default:
      return error(Code.InvalidArgument, 'empty or unknown reflection request');
  }
}

/** The file first, then every transitive dependency once (breadth first). */
function withDependencies(index: ReflectionIndex, file: DescFile): Uint8Array[] {
  const order: DescFile[] = [file];
  const seen = new Set(order);
  for (let i = 0; i < order.length; i++) {
    for (const dep of (order[i] as DescFile).dependencies) {
      if (!seen.has(dep)) {
        seen.add(dep);
        order.push(dep);
      }
    }
  }
  return order.map((f) => {
    let bytes = index.bytes.get(f);
    if (!bytes) index.bytes.set(f, (bytes = toBinary(FileDescriptorProtoSchema, f.proto)));
    return bytes;
  });
}

let v1alpha: DescService | undefined;

/** `grpc.reflection.v1alpha.ServerReflection`, derived from the v1 descriptor by renaming. */
function v1alphaService(): DescService {
  if (v1alpha) return v1alpha;
  const proto: FileDescriptorProto = clone(FileDescriptorProtoSchema, pb.file_grpc_reflection_v1_reflection.proto);
  proto.name = 'grpc/reflection/v1alpha/reflection.proto';
  proto.package = 'grpc.reflection.v1alpha';
  proto.options = undefined;
  const rename = (typeName: string): string => typeName.replace(/^\.grpc\.reflection\.v1\./, '.grpc.reflection.v1alpha.');
  for (const message of proto.messageType) for (const field of message.field) field.typeName = rename(field.typeName);
  for (const service of proto.service) {
    for (const method of service.method) {
      method.inputType = rename(method.inputType);
      method.outputType = rename(method.outputType);
    }
  }
  const service = createFileRegistry(proto, () => undefined).getService('grpc.reflection.v1alpha.ServerReflection');
  if (!service) throw new Error('could not derive grpc.reflection.v1alpha.ServerReflection');
  return (v1alpha = service);
}
