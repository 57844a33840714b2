/**
 * Off-the-shelf clients against web-bff: a plain @grpc/grpc-js client (no Connect code on
 * the client side), `buf curl` discovering the API by server reflection, the gRPC health
 * service, and the Connect/gRPC-Web protocols on both listeners.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, fromBinary, toBinary, type DescMessage, type MessageInitShape, type MessageShape } from '@bufbuild/protobuf';
import grpc from '@grpc/grpc-js';
import {
  CreateConversationRequestSchema,
  CreateConversationResponseSchema,
  GetConversationRequestSchema,
  GetConversationResponseSchema,
  WatchConversationRequestSchema,
  WatchConversationResponseSchema,
  health,
  type WatchConversationResponse,
} from '@bedrock/contracts';
import { startSystem, type System } from './support/system.ts';

const execFileAsync = promisify(execFile);
const BUF = path.resolve('node_modules/.bin/buf');
const SERVICE = '/bedrock.v1.ConversationService';

let s: System;
let address: string;
/** Working directories of the conversations created here: CreateConversation needs existing ones. */
let work: string;
beforeAll(async () => {
  s = await startSystem({ label: 'interop', playWorkers: false });
  address = new URL(s.bff.grpcUrl).host;
  work = mkdtempSync(path.join(tmpdir(), 'bedrock-interop-'));
  for (const dir of ['srv', 'bob', 'connect', 'grpc-web', 'connect-h1', 'grpc-web-h1', 'grpc']) mkdirSync(path.join(work, dir));
});
afterAll(async () => {
  await s?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

function metadata(token?: string): grpc.Metadata {
  const md = new grpc.Metadata();
  if (token) md.set('authorization', `Bearer ${token}`);
  return md;
}

function unary<I extends DescMessage, O extends DescMessage>(
  client: grpc.Client,
  method: string,
  input: I,
  output: O,
  req: MessageInitShape<I>,
  md: grpc.Metadata,
): Promise<MessageShape<O>> {
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      `${SERVICE}/${method}`,
      (m: MessageInitShape<I>) => Buffer.from(toBinary(input, create(input, m))),
      (b: Buffer) => fromBinary(output, b),
      req,
      md,
      (err, res) => (err ? reject(err) : resolve(res as MessageShape<O>)),
    );
  });
}

describe('a plain @grpc/grpc-js client', () => {
  it('creates, reads and watches a conversation with a bearer token', async () => {
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    try {
      const created = await unary(
        client,
        'CreateConversation',
        CreateConversationRequestSchema,
        CreateConversationResponseSchema,
        { cwd: path.join(work, 'srv') },
        metadata(s.tokens.alice),
      );
      const id = created.conversation!.id;
      expect(created.conversation!.cwd).toBe(path.join(work, 'srv'));
      const got = await unary(
        client,
        'GetConversation',
        GetConversationRequestSchema,
        GetConversationResponseSchema,
        { conversationId: id },
        metadata(s.tokens.alice),
      );
      expect(got.conversation!.id).toBe(id);

      const call = client.makeServerStreamRequest(
        `${SERVICE}/WatchConversation`,
        (m: MessageInitShape<typeof WatchConversationRequestSchema>) =>
          Buffer.from(toBinary(WatchConversationRequestSchema, create(WatchConversationRequestSchema, m))),
        (b: Buffer) => fromBinary(WatchConversationResponseSchema, b),
        { conversationId: id },
        metadata(s.tokens.alice),
      );
      const first = await new Promise<WatchConversationResponse>((resolve, reject) => {
        call.once('data', resolve);
        call.once('error', reject);
      });
      call.cancel();
      expect(first.event!.kind.case).toBe('snapshot');
      expect(first.event!.conversationId).toBe(id);
    } finally {
      client.close();
    }
  });

  it('gets UNAUTHENTICATED (16) without a token and NOT_FOUND (5) for another user', async () => {
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    try {
      const created = await unary(
        client,
        'CreateConversation',
        CreateConversationRequestSchema,
        CreateConversationResponseSchema,
        { cwd: path.join(work, 'srv') },
        metadata(s.tokens.alice),
      );
      const noToken = await unary(
        client,
        'GetConversation',
        GetConversationRequestSchema,
        GetConversationResponseSchema,
        { conversationId: created.conversation!.id },
        metadata(),
      ).catch((e: grpc.ServiceError) => e);
      expect((noToken as grpc.ServiceError).code).toBe(grpc.status.UNAUTHENTICATED);
      const other = await unary(
        client,
        'GetConversation',
        GetConversationRequestSchema,
        GetConversationResponseSchema,
        { conversationId: created.conversation!.id },
        metadata(s.tokens.bob),
      ).catch((e: grpc.ServiceError) => e);
      expect((other as grpc.ServiceError).code).toBe(grpc.status.NOT_FOUND);
      expect((other as grpc.ServiceError).details).toMatch(/not found/);
    } finally {
      client.close();
    }
  });

  it('checks health without a token', async () => {
    const client = new grpc.Client(address, grpc.credentials.createInsecure());
    try {
      const res = await new Promise<health.HealthCheckResponse>((resolve, reject) =>
        client.makeUnaryRequest(
          '/grpc.health.v1.Health/Check',
          (m: MessageInitShape<typeof health.HealthCheckRequestSchema>) =>
            Buffer.from(toBinary(health.HealthCheckRequestSchema, create(health.HealthCheckRequestSchema, m))),
          (b: Buffer) => fromBinary(health.HealthCheckResponseSchema, b),
          { service: 'bedrock.v1.ConversationService' },
          (err, r) => (err ? reject(err) : resolve(r!)),
        ),
      );
      expect(res.status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    } finally {
      client.close();
    }
  });
});

describe('buf curl through server reflection', () => {
  it('lists the API and calls it with a bearer token', async () => {
    const list = await execFileAsync(BUF, ['curl', '--http2-prior-knowledge', '--list-methods', s.bff.grpcUrl]);
    const methods = list.stdout.trim().split('\n');
    expect(methods).toEqual(
      expect.arrayContaining([
        'bedrock.v1.ConversationService/CreateConversation',
        'bedrock.v1.ConversationService/WatchConversation',
        'grpc.health.v1.Health/Check',
      ]),
    );
    const created = await execFileAsync(BUF, [
      'curl',
      '--http2-prior-knowledge',
      '--protocol',
      'grpc',
      '-H',
      `Authorization: Bearer ${s.tokens.bob}`,
      '-d',
      JSON.stringify({ cwd: path.join(work, 'bob') }),
      `${s.bff.grpcUrl}/bedrock.v1.ConversationService/CreateConversation`,
    ]);
    const conversation = JSON.parse(created.stdout).conversation;
    expect(conversation.cwd).toBe(path.join(work, 'bob'));
    const listed = await execFileAsync(BUF, [
      'curl',
      '--http2-prior-knowledge',
      '-H',
      `Authorization: Bearer ${s.tokens.bob}`,
      `${s.bff.grpcUrl}/bedrock.v1.ConversationService/ListConversations`,
    ]);
    expect(JSON.parse(listed.stdout).conversations.map((c: { id: string }) => c.id)).toContain(conversation.id);
  }, 60_000);

  it('reports UNAUTHENTICATED without a token', async () => {
    const err = await execFileAsync(BUF, [
      'curl',
      '--http2-prior-knowledge',
      '--protocol',
      'grpc',
      `${s.bff.grpcUrl}/bedrock.v1.ConversationService/ListConversations`,
    ]).catch((e: { stderr: string }) => e);
    expect((err as { stderr: string }).stderr).toMatch(/unauthenticated/);
  }, 60_000);
});

describe('browsers: Connect and gRPC-Web over HTTP/1.1', () => {
  it('serves every protocol on both listeners', async () => {
    for (const protocol of ['connect', 'grpc-web', 'connect-h1', 'grpc-web-h1', 'grpc'] as const) {
      const created = await s.client(s.tokens.alice, protocol).createConversation({ cwd: path.join(work, protocol) });
      expect(created.conversation!.cwd).toBe(path.join(work, protocol));
    }
  });

  it('answers CORS preflights for allowed origins with Authorization allowed', async () => {
    const res = await fetch(`${s.bff.httpUrl}${SERVICE}/ListConversations`, {
      method: 'OPTIONS',
      headers: {
        origin: 'http://localhost:5173',
        'access-control-request-method': 'POST',
        'access-control-request-headers': 'authorization,content-type',
      },
    });
    expect(res.status).toBe(204);
    expect(res.headers.get('access-control-allow-origin')).toBe('http://localhost:5173');
    expect(res.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
    expect(res.headers.get('access-control-allow-methods')).toMatch(/POST/);
    const denied = await fetch(`${s.bff.httpUrl}${SERVICE}/ListConversations`, {
      method: 'OPTIONS',
      headers: { origin: 'https://evil.example', 'access-control-request-method': 'POST' },
    });
    expect(denied.headers.get('access-control-allow-origin')).toBeNull();
    // An actual call exposes the gRPC-Web status headers to the page.
    const call = await fetch(`${s.bff.httpUrl}${SERVICE}/ListConversations`, {
      method: 'POST',
      headers: { origin: 'http://localhost:5173', 'content-type': 'application/json', authorization: `Bearer ${s.tokens.alice}` },
      body: '{}',
    });
    expect(call.status).toBe(200);
    expect(call.headers.get('access-control-expose-headers')).toMatch(/Grpc-Status/i);
  });

  it('serves a plain 404 page when the UI is not built', async () => {
    const res = await fetch(`${s.bff.httpUrl}/`);
    expect(res.status).toBe(404);
    expect(res.headers.get('content-type')).toMatch(/text\/html/);
    expect(await res.text()).toMatch(/web UI is not built/);
  });
});
