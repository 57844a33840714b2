import { describe, it, expect } from '@jest/globals';
import sharp from 'sharp';
import { LlmRequestPurpose, Role } from '@bedrock/contracts';
import { TOOLS } from '@bedrock/contracts/tools';
import { buildMessagesRequest, EMPTY_TOOL_RESULT, InvalidJobError } from './build-request.ts';
import { ImageRejectedError } from './images.ts';
import { image, makeJob, runOptions, text, toolResult, toolUse } from '../test/helpers.ts';

const options = runOptions();

describe('buildMessagesRequest', () => {
  it('sends the system prompt, the static tool schemas and the history', async () => {
    const params = await buildMessagesRequest(makeJob({ toolNames: ['bash', 'spawn_agents'] }), options);
    expect(params.stream).toBe(true);
    expect(params.model).toBe('claude-haiku-4-5');
    expect(params.system).toEqual([{ type: 'text', text: 'You are a test.', cache_control: { type: 'ephemeral' } }]);
    expect(params.tools).toEqual([
      { name: 'bash', description: TOOLS.bash.description, input_schema: TOOLS.bash.inputSchema },
      { name: 'spawn_agents', description: TOOLS.spawn_agents.description, input_schema: TOOLS.spawn_agents.inputSchema },
    ]);
    expect(params.messages).toEqual([{ role: 'user', content: [{ type: 'text', text: 'hello', cache_control: { type: 'ephemeral' } }] }]);
  });

  it('offers no tools for a continuation summary', async () => {
    const params = await buildMessagesRequest(makeJob({ purpose: LlmRequestPurpose.CONTINUATION, toolNames: ['bash'] }), options);
    expect(params.tools).toBeUndefined();
  });

  it('uses the job max_tokens, else the default, never above the model output limit', async () => {
    expect((await buildMessagesRequest(makeJob({ maxTokens: 1234 }), options)).max_tokens).toBe(1234);
    expect((await buildMessagesRequest(makeJob(), options)).max_tokens).toBe(16_000);
    expect((await buildMessagesRequest(makeJob({ maxTokens: 999_999 }), options)).max_tokens).toBe(64_000);
    expect((await buildMessagesRequest(makeJob({ model: '' }), runOptions({ defaultModel: 'bedrock-offline' }))).model).toBe('bedrock-offline');
  });

  it('maps tool calls and results, merges consecutive same-role turns and puts tool results first', async () => {
    const job = makeJob({
      messages: [
        { role: Role.USER, content: [text('run ls')] },
        { role: Role.ASSISTANT, content: [text('ok'), toolUse('toolu_1', 'bash', { command: 'ls' })] },
        { role: Role.USER, content: [toolResult('toolu_1', '', true)] },
        { role: Role.USER, content: [text('Mode changed.'), toolResult('toolu_x', 'late')] },
        { role: Role.ASSISTANT, content: [text('   ')] },
      ],
    });
    const params = await buildMessagesRequest(job, options);
    expect(params.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(params.messages[1]!.content).toEqual([
      { type: 'text', text: 'ok' },
      { type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'ls' } },
    ]);
    expect(params.messages[2]!.content).toEqual([
      { type: 'tool_result', tool_use_id: 'toolu_1', content: EMPTY_TOOL_RESULT, is_error: true },
      { type: 'tool_result', tool_use_id: 'toolu_x', content: 'late', is_error: false },
      { type: 'text', text: 'Mode changed.', cache_control: { type: 'ephemeral' } },
    ]);
  });

  it('places cache breakpoints on the system prompt, the previous user turn and the last block', async () => {
    const job = makeJob({
      messages: [
        { role: Role.USER, content: [text('one')] },
        { role: Role.ASSISTANT, content: [text('two')] },
        { role: Role.USER, content: [text('three'), text('four')] },
        { role: Role.ASSISTANT, content: [toolUse('toolu_2', 'bash', { command: 'pwd' })] },
        { role: Role.USER, content: [toolResult('toolu_2', '/tmp')] },
      ],
    });
    const params = await buildMessagesRequest(job, options);
    const marked = params.messages.flatMap((m, i) => (m.content as Array<{ cache_control?: unknown }>).flatMap((b, j) => (b.cache_control ? [`${i}.${j}`] : [])));
    expect(marked).toEqual(['2.1', '4.0']);
    const noSystem = await buildMessagesRequest(makeJob({ systemPrompt: '' }), options);
    expect(noSystem.system).toBeUndefined();
    expect(noSystem.tools?.at(-1)?.cache_control).toEqual({ type: 'ephemeral' });
  });

  it('encodes images as base64 sources and rejects bad ones naming the image', async () => {
    const png = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#123456' } }).png().toBuffer();
    const params = await buildMessagesRequest(makeJob({ messages: [{ role: Role.USER, content: [text('look'), image('image/png', png)] }] }), options);
    expect(params.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') }, cache_control: { type: 'ephemeral' } },
    ]);
    const bad = makeJob({ messages: [{ role: Role.USER, content: [image('image/png', png), image('image/png', Buffer.from('garbage'))] }] });
    await expect(buildMessagesRequest(bad, options)).rejects.toThrow(ImageRejectedError);
    await expect(buildMessagesRequest(bad, options)).rejects.toThrow(/image 2 of message 1 could not be decoded/);
  });

  it('rejects unknown tools and histories that cannot be sent', async () => {
    await expect(buildMessagesRequest(makeJob({ toolNames: ['rm_rf'] }), options)).rejects.toThrow(InvalidJobError);
    await expect(buildMessagesRequest(makeJob({ messages: [] }), options)).rejects.toThrow(/no messages/);
    await expect(buildMessagesRequest(makeJob({ messages: [{ role: Role.ASSISTANT, content: [text('hi')] }] }), options)).rejects.toThrow(/start with a user/);
  });
});
