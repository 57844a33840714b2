/**
 * Service identity on the internal API, against the real server: a call needs a service token
 * listed as a peer; the `bedrock-user-id` header counts only alongside web-bff's token; health
 * checking answers anyone. (These fail if the service-auth interceptor is taken off the server.)
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ConversationService, health, USER_HEADER } from '@bedrock/contracts';
import { generateToken, serviceTokenInterceptor } from '@bedrock/platform/server';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'serviceidentity', playWorkers: false });
});
afterAll(async () => {
  await h?.close();
});

const asUser =
  (user: string): Interceptor =>
  (next) =>
  (req) => {
    req.header.set(USER_HEADER, user);
    return next(req);
  };

/** A client of the service with exactly these interceptors (no credential unless one is given). */
function raw(...interceptors: Interceptor[]) {
  return createClient(ConversationService, createGrpcTransport({ baseUrl: h.service.grpcUrl, interceptors }));
}

async function ownedBy(user: string): Promise<number> {
  const { rows } = await h.pool.query<{ n: string }>('SELECT count(*) AS n FROM conversations WHERE owner_id = $1', [user]);
  return Number(rows[0]!.n);
}

describe('conversation service: service identity', () => {
  it('refuses a call without a service credential, with an actionable message', async () => {
    const err = await rpcError(raw().listConversations({}));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toMatch(
      /^missing service credential: this is an internal endpoint: present a service token \(BEDROCK_SERVICE_TOKEN_FILE\) listed in BEDROCK_SERVICE_PEERS_FILE/,
    );
  });

  it('refuses a forged bedrock-user-id header without a credential, and stores nothing', async () => {
    const forged = raw(asUser('mallory'));
    const created = await rpcError(forged.createConversation({ cwd: '/tmp' }));
    expect(created.code).toBe(Code.Unauthenticated);
    expect(created.rawMessage).toContain('missing service credential');
    // A server stream is refused the same way.
    const id = await h.createConversation('alice');
    const watch = await rpcError(
      (async () => {
        for await (const _ of forged.watchConversation({ conversationId: id })) break;
      })(),
    );
    expect(watch.code).toBe(Code.Unauthenticated);
    expect(await ownedBy('mallory')).toBe(0);
  });

  it('refuses a token that is not a peer', async () => {
    const err = await rpcError(raw(serviceTokenInterceptor(generateToken()), asUser('alice')).listConversations({}));
    expect(err.code).toBe(Code.Unauthenticated);
    expect(err.rawMessage).toMatch(/^service token not accepted: this is an internal endpoint/);
    const notBearer = await rpcError(
      raw((next) => (req) => {
        req.header.set('authorization', `Basic ${h.services.tokens['web-bff']}`);
        return next(req);
      }).listConversations({}),
    );
    expect(notBearer.code).toBe(Code.Unauthenticated);
  });

  it('refuses a user header from a valid peer other than web-bff', async () => {
    const gateway = raw(serviceTokenInterceptor(h.services.tokens['llm-gateway']!), asUser('alice'));
    const created = await rpcError(gateway.createConversation({ cwd: '/tmp' }));
    expect(created.code).toBe(Code.Unauthenticated);
    expect(created.rawMessage).toMatch(/service llm-gateway may not act for a user: only web-bff names users/);
    const id = await h.createConversation('alice');
    const read = await rpcError(gateway.getConversation({ conversationId: id }));
    expect(read.code).toBe(Code.Unauthenticated);
    // Without a user header too.
    const bare = await rpcError(raw(serviceTokenInterceptor(h.services.tokens['tool-runner']!)).listConversations({}));
    expect(bare.code).toBe(Code.Unauthenticated);
  });

  it('serves web-bff acting for a user', async () => {
    const bff = raw(serviceTokenInterceptor(h.services.tokens['web-bff']!), asUser('carol'));
    const { conversation } = await bff.createConversation({ cwd: '/tmp' });
    expect((await bff.getConversation({ conversationId: conversation!.id })).conversation?.id).toBe(conversation!.id);
    expect(await ownedBy('carol')).toBe(1);
    // web-bff without a user header is still refused: the call names nobody.
    const nobody = await rpcError(raw(serviceTokenInterceptor(h.services.tokens['web-bff']!)).listConversations({}));
    expect(nobody.code).toBe(Code.Unauthenticated);
    expect(nobody.rawMessage).toContain(`missing ${USER_HEADER} header`);
  });

  it('answers health checks without a credential', async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: h.service.grpcUrl }));
    expect((await client.check({ service: '' })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    expect((await client.check({ service: ConversationService.typeName })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
  });
});
