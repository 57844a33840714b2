import { describe, it, expect } from '@jest/globals';
import sharp from 'sharp';
import { LlmRequestPurpose, Role } from '@bedrock/contracts';
import { TOOLS } from '@bedrock/contracts/tools';
import { CONTINUE_AFTER_CUT, buildMessagesRequest, countImages, EMPTY_TOOL_RESULT, InvalidJobError, replaceRefusedImages, type RemovedImage } from './build-request.ts';
import { parseImageRefusal, RefusedImages } from './images.ts';
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

  it('never ends in an assistant turn (no prefill): a cut response is continued from a user turn', async () => {
    const job = makeJob({
      messages: [
        { role: Role.USER, content: [text('write a long essay')] },
        { role: Role.ASSISTANT, content: [text('The first part, cut by max_tokens ')] },
      ],
    });
    const params = await buildMessagesRequest(job, options);
    expect(params.messages.map((m) => m.role)).toEqual(['user', 'assistant', 'user']);
    expect(params.messages[2]!.content).toEqual([expect.objectContaining({ type: 'text', text: CONTINUE_AFTER_CUT })]);
    // The trailing whitespace of the cut text no longer ends the request.
    expect(params.messages[1]!.content).toEqual([{ type: 'text', text: 'The first part, cut by max_tokens ' }]);
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

  it('encodes images as base64 sources; one that cannot be sent becomes a note naming it, so the turn goes on', async () => {
    const png = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#123456' } }).png().toBuffer();
    const params = await buildMessagesRequest(makeJob({ messages: [{ role: Role.USER, content: [text('look'), image('image/png', png)] }] }), options);
    expect(params.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') }, cache_control: { type: 'ephemeral' } },
    ]);
    const bad = makeJob({ messages: [{ role: Role.USER, content: [image('image/png', png), image('image/png', Buffer.from('garbage'))] }] });
    const removed: RemovedImage[] = [];
    const built = await buildMessagesRequest(bad, options, { onImageRemoved: (r) => removed.push(r) });
    const blocks = built.messages[0]!.content as Array<{ type: string; text?: string }>;
    expect(blocks.map((b) => b.type)).toEqual(['image', 'text']);
    expect(blocks[1]!.text).toMatch(/^\[image removed: it could not be sent to the model: image 2 of message 1 could not be decoded as image\/png: .*\]$/);
    expect(removed).toEqual([expect.objectContaining({ label: 'image 2 of message 1', by: 'gateway' })]);
  });

  it('sends the note for an image the provider refused before, and replaces refused images in a built request', async () => {
    const png = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#654321' } }).png().toBuffer();
    const other = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#111111' } }).png().toBuffer();
    const refusedImages = new RefusedImages();
    const job = makeJob({ messages: [{ role: Role.USER, content: [text('look'), image('image/png', png), image('image/png', other)] }] });
    const params = await buildMessagesRequest(job, { ...options, refusedImages });
    // The provider names the second block of the first message: it becomes the note, keeps no image, and is remembered.
    expect(replaceRefusedImages(params, { at: { message: 0, block: 1 }, reason: 'too big' }, refusedImages)).toEqual([{ label: 'messages.0.content.1', reason: 'too big', by: 'provider' }]);
    expect((params.messages[0]!.content as Array<{ type: string }>).map((b) => b.type)).toEqual(['text', 'text', 'image']);
    expect(countImages(params)).toBe(1);
    // A block that is not an image is left alone.
    expect(replaceRefusedImages(params, { at: { message: 0, block: 0 }, reason: 'x' })).toEqual([]);
    // The next build sends the note at once, with the cache breakpoint where it was.
    const again = await buildMessagesRequest(job, { ...options, refusedImages });
    expect(again.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'text', text: '[image removed: the model provider refused it: too big]' },
      { type: 'image', source: { type: 'base64', media_type: 'image/png', data: other.toString('base64') }, cache_control: { type: 'ephemeral' } },
    ]);
    // Not named: every image goes, and none is remembered.
    expect(replaceRefusedImages(again, { reason: 'Could not process image' }, refusedImages).map((r) => r.label)).toEqual(['messages.0.content.2']);
    expect(again.messages[0]!.content.at(-1)).toEqual({ type: 'text', text: '[image removed: the model provider refused it: Could not process image]', cache_control: { type: 'ephemeral' } });
    expect(refusedImages.get(other.toString('base64'))).toBeUndefined();
  });

  it('reads the Messages API\'s image refusals', () => {
    expect(parseImageRefusal('messages.2.content.1.image.source.base64: image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes')).toEqual({
      at: { message: 2, block: 1 },
      reason: 'image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes',
    });
    expect(parseImageRefusal('messages.0.content.3.content.1.image.source.base64.data: Could not process image')).toEqual({ at: { message: 0, block: 3, nested: 1 }, reason: 'Could not process image' });
    expect(parseImageRefusal('Could not process image')).toEqual({ reason: 'Could not process image' });
    expect(parseImageRefusal('max_tokens: Input should be less than 64000')).toBeUndefined();
  });

  it('rejects unknown tools and histories that cannot be sent', async () => {
    await expect(buildMessagesRequest(makeJob({ toolNames: ['rm_rf'] }), options)).rejects.toThrow(InvalidJobError);
    await expect(buildMessagesRequest(makeJob({ messages: [] }), options)).rejects.toThrow(/no messages/);
    await expect(buildMessagesRequest(makeJob({ messages: [{ role: Role.ASSISTANT, content: [text('hi')] }] }), options)).rejects.toThrow(/start with a user/);
  });
});
