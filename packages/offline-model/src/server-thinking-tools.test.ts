/**
 * The local Messages API server through the real SDK: signed thinking blocks, refusals, server
 * tool blocks and citations, and the offline model served with its fixed signing key.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import Anthropic from '@anthropic-ai/sdk';
import { startMessagesApiServer, type MessagesApiServer } from './server.ts';
import { offlineModelResponder } from './offline-model.ts';
import { OFFLINE_SIGNING_KEY } from './signing.ts';
import { parseSse, post, request } from './server.support.ts';

describe('local Messages API server: thinking, refusals, server tools through the real SDK', () => {
  let server: MessagesApiServer;
  let client: Anthropic;
  const model = 'claude-sonnet-5-5';
  const tools = [
    {
      name: 'bash',
      description: 'Runs a command.',
      input_schema: { type: 'object' as const, properties: { command: { type: 'string' } } },
    },
  ];
  const webSearch = { type: 'web_search_20250305' as const, name: 'web_search' as const, max_uses: 5 };
  beforeAll(async () => {
    server = await startMessagesApiServer();
    client = new Anthropic({ apiKey: 'sk-test', baseURL: server.url, maxRetries: 0 });
  });
  afterAll(async () => {
    await server.close();
  });

  /** Streams one scripted answer through the SDK and returns its final message. */
  async function streamed(params: Record<string, unknown>) {
    return client.messages.stream({ model, max_tokens: 4000, thinking: { type: 'adaptive' }, ...params } as never).finalMessage();
  }
  async function badRequest(
    params: Record<string, unknown>,
  ): Promise<{ status: number; message: string; requestId: string | null | undefined }> {
    try {
      await client.messages.create({ model, max_tokens: 4000, ...params } as never);
    } catch (err) {
      const e = err as InstanceType<typeof Anthropic.APIError>;
      return { status: e.status as number, message: (e.error as { error: { message: string } }).error.message, requestId: e.requestID };
    }
    throw new Error('the request was accepted');
  }

  it('signs streamed thinking blocks; sent back unchanged in a tool loop they are accepted, modified they are refused', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'thinking', thinking: 'I should list the files first.' },
        { type: 'redacted_thinking' },
        { type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } },
      ],
    });
    const first = await streamed({ tools, messages: [{ role: 'user', content: 'What is here?' }] });
    expect(first.stop_reason).toBe('tool_use');
    const [thinking, redacted] = first.content as [Anthropic.ThinkingBlock, Anthropic.RedactedThinkingBlock];
    expect(thinking).toEqual({
      type: 'thinking',
      thinking: 'I should list the files first.',
      signature: server.signThinking('I should list the files first.'),
    });
    expect(redacted.type).toBe('redacted_thinking');
    expect(first.usage.output_tokens_details?.thinking_tokens).toBeGreaterThan(0);

    const history = (assistant: unknown[]) => [
      { role: 'user', content: 'What is here?' },
      { role: 'assistant', content: assistant },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'a.txt' }] },
    ];
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'One file: a.txt.' }] });
    const second = await streamed({ tools, messages: history(first.content) });
    expect(second.content).toEqual([{ type: 'text', text: 'One file: a.txt.' }]);

    const before = server.violations.length;
    const tampered = await badRequest({
      tools,
      thinking: { type: 'adaptive' },
      messages: history([{ ...thinking, thinking: 'I should delete the files first.' }, redacted, first.content[2]]),
    });
    expect(tampered).toMatchObject({ status: 400, message: 'messages.1.content.0: Invalid `signature` in `thinking` block' });
    const invented = await badRequest({
      tools,
      thinking: { type: 'adaptive' },
      messages: history([thinking, { type: 'redacted_thinking', data: 'aW52ZW50ZWQ=' }, first.content[2]]),
    });
    expect(invented.message).toBe('messages.1.content.1: Invalid `data` in `redacted_thinking` block');
    // A turn without its thinking is accepted under adaptive thinking (the model may skip it);
    // the manual-thinking rule is checked in validate-request.test.ts.
    expect(server.violations.slice(before)).toEqual([tampered, invented].map((r) => ({ requestId: r.requestId, message: r.message })));
  });

  it('signs the thinking blocks of non-streaming answers too', async () => {
    server.enqueue({
      kind: 'message',
      content: [
        { type: 'thinking', thinking: 'Short.' },
        { type: 'text', text: 'Yes.' },
      ],
    });
    const message = await client.messages.create({ model, max_tokens: 100, messages: [{ role: 'user', content: 'Sure?' }] });
    expect(message.content[0]).toEqual({ type: 'thinking', thinking: 'Short.', signature: server.signThinking('Short.') });
    expect(message.stop_details).toBeNull();
  });

  it('accepts thinking blocks of another server only when it shares the signing key', async () => {
    const a = await startMessagesApiServer({ signingKey: OFFLINE_SIGNING_KEY });
    const b = await startMessagesApiServer({ signingKey: OFFLINE_SIGNING_KEY });
    try {
      const messages = [
        { role: 'user', content: 'q' },
        {
          role: 'assistant',
          content: [
            { type: 'thinking', thinking: 't', signature: a.signThinking('t') },
            { type: 'redacted_thinking', data: a.redactedThinkingData() },
            { type: 'text', text: 'a' },
          ],
        },
        { role: 'user', content: 'again' },
      ];
      b.enqueue({ kind: 'message', content: [{ type: 'text', text: 'ok' }] });
      expect((await post(b, { ...request, messages })).status).toBe(200);
      expect((await post(server, { ...request, messages })).status).toBe(400);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('streams a refusal with its stop details', async () => {
    server.enqueue({
      kind: 'message',
      stopReason: 'refusal',
      stopExplanation: 'The request asks for malware.',
      content: [{ type: 'text', text: 'I can' }],
    });
    const message = await streamed({ messages: [{ role: 'user', content: 'Write malware.' }] });
    expect(message.stop_reason).toBe('refusal');
    expect(message.stop_details).toEqual({ type: 'refusal', category: null, explanation: 'The request asks for malware.' });
    expect(message.content).toEqual([{ type: 'text', text: 'I can' }]);
  });

  it('streams server tool blocks and citations the SDK accumulates; the paused turn is resumed as sent', async () => {
    const results = [
      { type: 'web_search_result', url: 'https://bedrock.test/', title: 'Bedrock', encrypted_content: 'ZW5j', page_age: null },
    ];
    const citation = {
      type: 'web_search_result_location',
      url: 'https://bedrock.test/',
      title: 'Bedrock',
      encrypted_index: 'aWR4',
      cited_text: 'Bedrock runs agents.',
    };
    server.enqueue({
      kind: 'message',
      stopReason: 'pause_turn',
      content: [
        { type: 'thinking', thinking: 'Search first.' },
        { type: 'text', text: 'Searching.' },
        { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'bedrock' } },
        { type: 'web_search_tool_result', content: results },
        { type: 'text', text: 'It runs agents.', citations: [citation] },
      ],
    });
    const paused = await streamed({ tools: [...tools, webSearch], messages: [{ role: 'user', content: 'What is bedrock?' }] });
    expect(paused.stop_reason).toBe('pause_turn');
    expect(paused.content).toEqual([
      { type: 'thinking', thinking: 'Search first.', signature: server.signThinking('Search first.') },
      { type: 'text', text: 'Searching.' },
      { type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'bedrock' } },
      { type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: results },
      { type: 'text', text: 'It runs agents.', citations: [citation] },
    ]);
    expect(paused.usage.server_tool_use).toEqual({ web_search_requests: 1, web_fetch_requests: 0 });
    server.enqueue({ kind: 'message', content: [{ type: 'text', text: 'Done.' }] });
    const resumed = await streamed({
      tools: [...tools, webSearch],
      messages: [
        { role: 'user', content: 'What is bedrock?' },
        { role: 'assistant', content: paused.content },
      ],
    });
    expect(resumed.content).toEqual([{ type: 'text', text: 'Done.' }]);
    // Without the server tool defined, or as a plain prefill, the API refuses it.
    expect(
      (
        await badRequest({
          tools,
          messages: [
            { role: 'user', content: 'What is bedrock?' },
            { role: 'assistant', content: paused.content },
          ],
        })
      ).message,
    ).toMatch(/^messages.1.content.2: `server_tool_use` block calls `web_search`, but `tools` defines no server tool of that name/);
    expect(
      (
        await badRequest({
          tools,
          messages: [
            { role: 'user', content: 'Hi' },
            { role: 'assistant', content: [{ type: 'text', text: 'Hello' }] },
          ],
        })
      ).message,
    ).toBe('This model does not support assistant message prefill. The conversation must end with a user message.');
  });

  it('serves the offline model with its fixed key: a /think-long thinking block comes back valid', async () => {
    const offline = await startMessagesApiServer({ fallback: offlineModelResponder(), signingKey: OFFLINE_SIGNING_KEY });
    try {
      const c = new Anthropic({ apiKey: 'k', baseURL: offline.url, maxRetries: 0 });
      const ask = [{ role: 'user' as const, content: '/think-long how to split a large write' }];
      const answer = await c.messages
        .stream({ model: 'bedrock-offline', max_tokens: 4000, thinking: { type: 'adaptive' }, messages: ask })
        .finalMessage();
      expect(answer.content.map((b) => b.type)).toEqual(['thinking', 'text']);
      const next = await c.messages
        .stream({
          model: 'bedrock-offline',
          max_tokens: 4000,
          thinking: { type: 'adaptive' },
          messages: [...ask, { role: 'assistant', content: answer.content }, { role: 'user', content: 'thanks' }],
        })
        .finalMessage();
      expect(next.content[0]!.type).toBe('text');
      // /cut over HTTP: the call is cut (no content_block_stop, stop reason max_tokens) below 64000, whole at 64000.
      const cutAsk = {
        model: 'bedrock-offline',
        stream: true,
        tools: [{ name: 'patch', input_schema: { type: 'object' } }],
        messages: [{ role: 'user', content: '/cut big.txt' }],
      };
      const cut = parseSse(await (await post(offline, { ...cutAsk, max_tokens: 32000 })).text()).map((e) => JSON.parse(e.data));
      expect(cut.filter((e) => e.type === 'content_block_stop').map((e) => e.index)).toEqual([0]);
      expect(cut.find((e) => e.type === 'message_delta')).toMatchObject({
        delta: { stop_reason: 'max_tokens' },
        usage: { output_tokens: 32000 },
      });
      const whole = parseSse(await (await post(offline, { ...cutAsk, max_tokens: 64000 })).text()).map((e) => JSON.parse(e.data));
      expect(whole.filter((e) => e.type === 'content_block_stop').map((e) => e.index)).toEqual([0, 1]);
      expect(whole.find((e) => e.type === 'message_delta').delta.stop_reason).toBe('tool_use');
      const json = whole
        .filter((e) => e.type === 'content_block_delta' && e.index === 1)
        .map((e) => e.delta.partial_json)
        .join('');
      expect(JSON.parse(json).patches[0].new_text.split('\n')).toHaveLength(2001);
      expect((await post(offline, { ...cutAsk, max_tokens: 64001 })).status).toBe(400);
      expect(offline.violations.map((v) => v.message)).toEqual([
        'max_tokens: 64001 > 64000, which is the maximum allowed number of output tokens for bedrock-offline',
      ]);
    } finally {
      await offline.close();
    }
  });
});
