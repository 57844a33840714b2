/**
 * The local Messages API server over HTTP: the event order of a stream, keys, scripted errors,
 * request validation, injected faults, client aborts and refused images.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import { startMessagesApiServer, type MessagesApiServer } from './server.ts';
import { parseSse, post, request } from './server.support.ts';

describe('local Messages API server', () => {
  let server: MessagesApiServer;
  beforeAll(async () => {
    server = await startMessagesApiServer();
  });
  afterAll(async () => {
    await server.close();
  });

  it('streams the exact event order of the API, with a request-id header', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'text', text: 'Hello there, world' },
        { type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } },
      ],
      usage: { input_tokens: 42, output_tokens: 7 },
      chunkChars: 6,
    });
    const res = await post(server, { ...request, stream: true });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(res.headers.get('request-id')).toMatch(/^req_/);
    const events = parseSse(await res.text());
    expect(events.map((e) => e.event)).toEqual([
      'message_start',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'ping',
      'content_block_stop',
      'content_block_start',
      'content_block_delta',
      'content_block_delta',
      'content_block_delta',
      'content_block_stop',
      'message_delta',
      'message_stop',
    ]);
    for (const e of events) expect(JSON.parse(e.data).type).toBe(e.event);
    const start = JSON.parse(events[0]!.data);
    expect(start.message).toMatchObject({ type: 'message', role: 'assistant', model: 'claude-test', content: [], stop_reason: null });
    expect(start.message.usage.input_tokens).toBe(42);
    const json = events.filter((e) => e.event === 'content_block_delta').map((e) => JSON.parse(e.data).delta);
    expect(
      json
        .filter((d) => d.type === 'text_delta')
        .map((d) => d.text)
        .join(''),
    ).toBe('Hello there, world');
    expect(
      JSON.parse(
        json
          .filter((d) => d.type === 'input_json_delta')
          .map((d) => d.partial_json)
          .join(''),
      ),
    ).toEqual({ command: 'ls' });
    const delta = JSON.parse(events.at(-2)!.data);
    expect(delta).toEqual({
      type: 'message_delta',
      delta: { stop_reason: 'tool_use', stop_sequence: null, stop_details: null },
      usage: { output_tokens: 7 },
    });
  });

  it('answers through the real SDK with an API key sent as Bearer, and records the request', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'pong' }] });
    const client = new Anthropic({ apiKey: 'sk-test', baseURL: server.url, maxRetries: 0 });
    const message = await client.messages.create(request);
    expect(message.content).toEqual([{ type: 'text', text: 'pong' }]);
    expect(message.stop_reason).toBe('end_turn');
    const seen = server.requests.at(-1)!;
    expect(seen.headers.authorization ?? seen.headers['x-api-key']).toMatch(/sk-test/);
    expect(seen.body?.messages).toEqual(request.messages);
  });

  it('accepts authToken clients and x-api-key, and answers 401 without a key', async () => {
    server.enqueue(
      { kind: 'message', content: [{ type: 'text', text: 'a' }] },
      { kind: 'message', content: [{ type: 'text', text: 'b' }] },
    );
    const viaToken = new Anthropic({ authToken: 'tok', apiKey: null, baseURL: server.url, maxRetries: 0 });
    expect((await viaToken.messages.create(request)).content).toEqual([{ type: 'text', text: 'a' }]);
    expect((await post(server, request, { 'x-api-key': 'k' })).status).toBe(200);
    const none = await post(server, request, {});
    expect(none.status).toBe(401);
    expect(await none.json()).toMatchObject({ type: 'error', error: { type: 'authentication_error' } });
  });

  it('sends scripted errors with the API body shape and retry-after', async () => {
    server.enqueue({ kind: 'error', status: 429, errorType: 'rate_limit_error', message: 'slow down', retryAfter: '7' });
    const res = await post(server, request);
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    const body = (await res.json()) as { request_id: string };
    expect(body).toMatchObject({ type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } });
    expect(body.request_id).toBe(res.headers.get('request-id'));
  });

  it('validates requests like the API: alternating roles, required fields; records each violation', async () => {
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'kept' }] });
    const before = server.violations.length;
    const res = await post(server, {
      ...request,
      messages: [
        { role: 'user', content: 'a' },
        { role: 'user', content: 'b' },
      ],
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { type: string; message: string } };
    expect(body.error.type).toBe('invalid_request_error');
    expect((await post(server, { model: 'x', messages: request.messages })).status).toBe(400);
    expect((await fetch(`${server.url}/v1/nothing`, { method: 'POST', headers: { 'x-api-key': 'k' } })).status).toBe(404);
    expect(server.violations.slice(before)).toEqual([
      { requestId: res.headers.get('request-id'), message: body.error.message },
      { requestId: expect.stringMatching(/^req_/), message: 'max_tokens: Field required' },
    ]);
    // A refused request never takes a scripted response.
    expect(server.pending()).toBe(1);
    expect((await post(server, request)).status).toBe(200);
  });

  it('injects mid-stream error events, clean ends and cuts', async () => {
    server.enqueue(
      {
        kind: 'message',
        content: [{ type: 'text', text: 'abc' }],
        fault: { type: 'error-event', afterEvents: 3, errorType: 'overloaded_error', message: 'Overloaded' },
      },
      { kind: 'message', content: [{ type: 'text', text: 'abc' }], fault: { type: 'end', afterEvents: 2 } },
      { kind: 'message', content: [{ type: 'text', text: 'abc' }], fault: { type: 'cut', afterEvents: 2 } },
    );
    const withError = parseSse(await (await post(server, { ...request, stream: true })).text());
    expect(withError.map((e) => e.event)).toEqual(['message_start', 'content_block_start', 'content_block_delta', 'error']);
    expect(JSON.parse(withError[3]!.data)).toEqual({ type: 'error', error: { type: 'overloaded_error', message: 'Overloaded' } });
    const ended = parseSse(await (await post(server, { ...request, stream: true })).text());
    expect(ended.map((e) => e.event)).toEqual(['message_start', 'content_block_start']);
    const cut = await post(server, { ...request, stream: true });
    await expect(cut.text()).rejects.toThrow();
  });

  it('streams a partial tool_use without its content_block_stop on max_tokens', async () => {
    server.enqueue({
      kind: 'message',
      stopReason: 'max_tokens',
      content: [{ type: 'tool_use', name: 'bash', input: { command: 'echo hello' }, partialJsonChars: 10 }],
    });
    const events = parseSse(await (await post(server, { ...request, stream: true })).text());
    expect(events.map((e) => e.event)).not.toContain('content_block_stop');
    expect(JSON.parse(events.find((e) => e.event === 'message_delta')!.data).delta.stop_reason).toBe('max_tokens');
  });

  it('records a client abort', async () => {
    server.enqueue({ kind: 'hang' });
    const controller = new AbortController();
    const before = server.clientAborts.length;
    const aborted = fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'x-api-key': 'k', 'content-type': 'application/json' },
      body: JSON.stringify(request),
      signal: controller.signal,
    }).catch((e: unknown) => e);
    await new Promise((r) => setTimeout(r, 50));
    controller.abort();
    await aborted;
    await new Promise((r) => setTimeout(r, 50));
    expect(server.clientAborts.length).toBe(before + 1);
    expect(server.clientAborts.at(-1)!.requestId).toBe(server.requests.at(-1)!.requestId);
  });

  it('refuses a chosen image as the API does: 400 invalid_request_error naming it, before any scripted response', async () => {
    const bad = Buffer.from('bad image bytes').toString('base64');
    const good = Buffer.from('good image bytes').toString('base64');
    const img = (data: string) => ({ type: 'image', source: { type: 'base64', media_type: 'image/png', data } });
    server.refuseImages({ match: (i) => i.data === bad, reason: 'image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes' });
    try {
      server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'kept for the next request' }] });
      const body = {
        ...request,
        messages: [
          { role: 'user', content: [{ type: 'text', text: 'look' }, img(good)] },
          { role: 'assistant', content: 'ok' },
          { role: 'user', content: [{ type: 'text', text: 'and' }, img(bad)] },
        ],
      };
      const res = await post(server, body);
      expect(res.status).toBe(400);
      expect(await res.json()).toMatchObject({
        type: 'error',
        error: {
          type: 'invalid_request_error',
          message: 'messages.2.content.1.image.source.base64: image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes',
        },
      });
      expect(server.pending()).toBe(1);
      // Inside a tool result, and without naming it.
      server.clearImageRefusals();
      server.refuseImages({ match: (i) => i.data === bad, named: false });
      const nested = {
        ...request,
        tools: [{ name: 'look', input_schema: { type: 'object' } }],
        messages: [
          { role: 'user', content: 'look at it' },
          { role: 'assistant', content: [{ type: 'tool_use', id: 't', name: 'look', input: {} }] },
          { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't', content: [img(bad)] }] },
        ],
      };
      const res2 = await post(server, nested);
      expect(res2.status).toBe(400);
      expect(((await res2.json()) as { error: { message: string } }).error.message).toBe('Could not process image');
      server.clearImageRefusals();
      server.refuseImages({ match: (i) => i.data === bad });
      const res3 = await post(server, nested);
      expect(((await res3.json()) as { error: { message: string } }).error.message).toBe(
        'messages.2.content.0.content.0.image.source.base64: Could not process image',
      );
      // Without the image the scripted response answers.
      const res4 = await post(server, { ...request, messages: [{ role: 'user', content: [img(good)] }] });
      expect(res4.status).toBe(200);
    } finally {
      server.clearImageRefusals();
    }
  });
});
