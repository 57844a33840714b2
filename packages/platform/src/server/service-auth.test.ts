import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { GetCapabilitiesResponseSchema, ToolRunnerService, health, reflection as pb } from '@bedrock/contracts';
import { startGrpcServer, type GrpcServer } from './grpc-server.ts';
import { createHealth, registerHealth } from './health.ts';
import { createLogger } from './logger.ts';
import { registerReflection } from './reflection.ts';
import {
  generateServiceCredentials,
  INTERNAL_ENDPOINT_HINT,
  readServicePeersFile,
  readServiceTokenFile,
  serviceAuthInterceptor,
  servicePeer,
  serviceTokenInterceptor,
} from './service-auth.ts';
import { createTokenStore, generateToken, hashToken, parseTokenEntries } from './token-entries.ts';

/** A logger whose JSON lines the test can read. */
function capturingLogger() {
  const chunks: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, done) {
      chunks.push(chunk.toString());
      done();
    },
  });
  const lines = () =>
    chunks
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger: createLogger({ service: 'test', level: 'info', destination }), lines, text: () => chunks.join('') };
}

/** An internal server whose one method answers with the authenticated peer's name. */
async function internalServer(peers: Parameters<typeof serviceAuthInterceptor>[0]['peers']) {
  const log = capturingLogger();
  const server = await startGrpcServer({
    host: '127.0.0.1',
    port: 0,
    logger: createLogger({ service: 'test', level: 'silent' }),
    interceptors: [serviceAuthInterceptor({ peers, logger: log.logger })],
    routes: (router) => {
      router.service(ToolRunnerService, {
        getCapabilities: (_req, ctx) => create(GetCapabilitiesResponseSchema, { capabilities: { runnerId: servicePeer(ctx) ?? '(none)' } }),
        cancelTool: () => {
          throw new ConnectError('unused', Code.Unimplemented);
        },
        // eslint-disable-next-line require-yield
        async *executeTool() {
          throw new ConnectError('unused', Code.Unimplemented);
        },
      });
      registerHealth(router, createHealth());
      registerReflection(router, [ToolRunnerService]);
    },
  });
  return { server, log };
}

const client = (server: GrpcServer, ...interceptors: Interceptor[]) =>
  createClient(ToolRunnerService, createGrpcTransport({ baseUrl: server.url, interceptors }));

async function refusal(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('expected the call to be refused');
}

describe('serviceAuthInterceptor', () => {
  const creds = generateServiceCredentials(['web-bff', 'tool-runner']);
  let s: Awaited<ReturnType<typeof internalServer>>;
  beforeAll(async () => {
    s = await internalServer(creds.peers);
  });
  afterAll(async () => {
    await s.server.close(0);
  });

  it('passes a listed peer and names it to the handler', async () => {
    const res = await client(s.server, serviceTokenInterceptor(creds.tokens['web-bff']!)).getCapabilities({});
    expect(res.capabilities?.runnerId).toBe('web-bff');
    const other = await client(s.server, serviceTokenInterceptor(creds.tokens['tool-runner']!)).getCapabilities({});
    expect(other.capabilities?.runnerId).toBe('tool-runner');
  });

  it('refuses a call without a credential or with an unknown token, saying what to do', async () => {
    const none = await refusal(client(s.server).getCapabilities({}));
    expect([none.code, none.rawMessage]).toEqual([Code.Unauthenticated, `missing service credential: ${INTERNAL_ENDPOINT_HINT}`]);
    const wrong = generateToken();
    const bad = await refusal(client(s.server, serviceTokenInterceptor(wrong)).getCapabilities({}));
    expect([bad.code, bad.rawMessage]).toEqual([Code.Unauthenticated, `service token not accepted: ${INTERNAL_ENDPOINT_HINT}`]);
    // The hash of a valid token is not a valid token.
    const hashed = await refusal(client(s.server, serviceTokenInterceptor(hashToken(creds.tokens['web-bff']!))).getCapabilities({}));
    expect(hashed.code).toBe(Code.Unauthenticated);
    // Refusals are logged without the presented token.
    expect(s.log.text()).toContain('internal call refused');
    expect(s.log.text()).not.toContain(wrong);
  });

  it('logs at start which services it accepts', () => {
    expect(s.log.lines().find((l) => l.msg === 'internal calls accepted from these services')?.peers).toEqual(['web-bff', 'tool-runner']);
  });

  it('leaves health checking and reflection open', async () => {
    const h = createClient(health.Health, createGrpcTransport({ baseUrl: s.server.url }));
    expect((await h.check({ service: '' })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    const r = createClient(pb.ServerReflection, createGrpcTransport({ baseUrl: s.server.url }));
    async function* one() {
      yield create(pb.ServerReflectionRequestSchema, { messageRequest: { case: 'listServices', value: '' } });
    }
    for await (const res of r.serverReflectionInfo(one())) {
      expect(res.messageResponse.case).toBe('listServicesResponse');
      break;
    }
  });
});

describe('serviceAuthInterceptor without peers', () => {
  it('fails closed: refuses every call but health, and warns once at start', async () => {
    const { server, log } = await internalServer([]);
    try {
      const warnings = () => log.lines().filter((l) => String(l.msg).startsWith('no service peers configured'));
      expect(warnings()).toHaveLength(1);
      const err = await refusal(client(server, serviceTokenInterceptor(generateToken())).getCapabilities({}));
      expect(err.code).toBe(Code.Unauthenticated);
      const h = createClient(health.Health, createGrpcTransport({ baseUrl: server.url }));
      expect((await h.check({ service: '' })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
      expect(warnings()).toHaveLength(1);
    } finally {
      await server.close(0);
    }
  });
});

describe('service credential files', () => {
  const dir = mkdtempSync(join(tmpdir(), 'bedrock-service-auth-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const file = (name: string, text: string) => {
    const path = join(dir, name);
    writeFileSync(path, text);
    return path;
  };

  it('reads a token file (one line, trimmed)', () => {
    expect(readServiceTokenFile(file('token', '  bdr_abc \n'))).toBe('bdr_abc');
    expect(() => readServiceTokenFile(file('empty', '\n'))).toThrow(/BEDROCK_SERVICE_TOKEN_FILE=.*empty is empty/);
    expect(() => readServiceTokenFile(file('two', 'a b\n'))).toThrow(/one line without spaces/);
    expect(() => readServiceTokenFile(join(dir, 'missing'))).toThrow(
      /BEDROCK_SERVICE_TOKEN_FILE=.*missing: cannot read the file \(ENOENT\)/,
    );
  });

  it('reads a peers file in the BEDROCK_TOKENS format, naming bad lines without their content', () => {
    const t = generateToken();
    const peers = readServicePeersFile(file('peers', `# peers\n\nweb-bff:${hashToken(t)}  # the BFF\n`));
    expect(createTokenStore(peers).authenticate(t)).toBe('web-bff');
    expect(() => readServicePeersFile(file('bad', `web-bff:${t}\n`))).toThrow(
      /BEDROCK_SERVICE_PEERS_FILE=.*bad entry 1 \(service web-bff\): expected the token's SHA-256/,
    );
    try {
      readServicePeersFile(join(dir, 'bad'));
    } catch (err) {
      expect(String(err)).not.toContain(t);
    }
    expect(() => readServicePeersFile(join(dir, 'nope'))).toThrow(/BEDROCK_SERVICE_PEERS_FILE=.*nope: cannot read the file/);
  });

  it('generated credentials: the peers file text and the entries agree', () => {
    const creds = generateServiceCredentials(['a', 'b']);
    const store = createTokenStore(parseTokenEntries(creds.peersFile, 'generated', 'service'));
    expect(store.authenticate(creds.tokens.a!)).toBe('a');
    expect(createTokenStore(creds.peers).authenticate(creds.tokens.b!)).toBe('b');
    expect(creds.tokens.a).not.toBe(creds.tokens.b);
  });
});
