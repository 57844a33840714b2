/** buildMessagesRequest: tools, max_tokens, history mapping, cache breakpoints, images, invalid jobs; more in build-request.*.test.ts. */
import { describe, it, expect } from '@jest/globals';
import sharp from 'sharp';
import { LlmRequestPurpose, Role, ServerTool, ThinkingLevel } from '@bedrock/contracts';
import { TOOLS } from '@bedrock/contracts/tools';
import { CONTINUE_AFTER_CUT, buildMessagesRequest } from './build-request.ts';
import { InvalidJobError, type RemovedImage } from './build-options.ts';
import { EMPTY_TOOL_RESULT } from './convert-history.ts';
import { countImages, replaceRefusedImages } from './request-images.ts';
import { SERVER_TOOL_DEFINITIONS } from './request-tools.ts';
import { parseImageRefusal, RefusedImages } from './images.ts';
import { image, makeJob, runOptions, serverTool, text, toolResult, toolUse } from '../test/helpers.ts';
import { options, toolNames } from '../test/build-request-fixtures.ts';

describe('buildMessagesRequest', () => {
  it('sends the system prompt, the static tool schemas and the history', async () => {
    const params = await buildMessagesRequest(makeJob({ toolNames: ['bash', 'spawn_agents'] }), options);
    expect(params.stream).toBe(true);
    expect(params.model).toBe('claude-haiku-4-5');
    expect(params.system).toEqual([{ type: 'text', text: 'You are a test.', cache_control: { type: 'ephemeral', ttl: '1h' } }]);
    expect(params.tools).toEqual([
      { name: 'bash', description: TOOLS.bash.description, input_schema: TOOLS.bash.inputSchema },
      {
        name: 'spawn_agents',
        description: TOOLS.spawn_agents.description,
        input_schema: TOOLS.spawn_agents.inputSchema,
        cache_control: { type: 'ephemeral', ttl: '1h' },
      },
    ]);
    expect(params.messages).toEqual([
      { role: 'user', content: [{ type: 'text', text: 'hello', cache_control: { type: 'ephemeral', ttl: '1h' } }] },
    ]);
  });

  it('sends a continuation summary exactly as a turn (same tools, no tool_choice, same thinking), so it reads the cached prefix', async () => {
    const job = { toolNames: ['bash'], thinking: ThinkingLevel.HIGH };
    const params = await buildMessagesRequest(makeJob({ purpose: LlmRequestPurpose.CONTINUATION, ...job }), options);
    const turn = await buildMessagesRequest(makeJob(job), options);
    expect(toolNames(params)).toEqual(['bash']);
    expect(params.tool_choice).toBeUndefined();
    expect([params.tools, params.system, params.thinking, params.output_config]).toEqual([
      turn.tools,
      turn.system,
      turn.thinking,
      turn.output_config,
    ]);
  });

  it('never sends tool blocks without tools: a job that lists none defines those its history used, with tool_choice none', async () => {
    const history = [
      { role: Role.USER, content: [text('find it')] },
      {
        role: Role.ASSISTANT,
        content: [
          serverTool({ type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'x' } }),
          serverTool({ type: 'web_search_tool_result', tool_use_id: 'srvtoolu_1', content: [] }),
          toolUse('toolu_1', 'patch', { path: 'a' }),
        ],
      },
      { role: Role.USER, content: [toolResult('toolu_1', 'ok')] },
    ];
    const continuation = await buildMessagesRequest(
      makeJob({ purpose: LlmRequestPurpose.CONTINUATION, toolNames: [], messages: history }),
      options,
    );
    expect(toolNames(continuation)).toEqual(['patch', 'web_search']);
    expect(continuation.tool_choice).toEqual({ type: 'none' });
    const turn = await buildMessagesRequest(makeJob({ toolNames: [], messages: history }), options);
    expect(toolNames(turn)).toEqual(['patch', 'web_search']);
    expect(turn.tool_choice).toEqual({ type: 'none' });
    // Only results of tools it does not know: every tool is defined (none can be called).
    const orphan = await buildMessagesRequest(
      makeJob({
        toolNames: [],
        messages: [
          { role: Role.USER, content: [text('a')] },
          { role: Role.ASSISTANT, content: [toolUse('toolu_9', 'retired_tool', {})] },
          { role: Role.USER, content: [toolResult('toolu_9', 'x')] },
        ],
      }),
      options,
    );
    expect(toolNames(orphan)).toEqual(Object.keys(TOOLS));
    expect(orphan.tool_choice).toEqual({ type: 'none' });
    // No tool blocks and no tools: neither tools nor tool_choice.
    const plain = await buildMessagesRequest(makeJob({ toolNames: [] }), options);
    expect([plain.tools, plain.tool_choice]).toEqual([undefined, undefined]);
  });

  it('adds the server tools the conversation turned on, after its own tools, for turns and continuation summaries', async () => {
    const params = await buildMessagesRequest(
      makeJob({
        toolNames: ['bash'],
        serverTools: [ServerTool.WEB_FETCH, ServerTool.WEB_SEARCH, ServerTool.WEB_FETCH, ServerTool.UNSPECIFIED],
      }),
      options,
    );
    expect(params.tools?.slice(1)).toEqual([
      { type: 'web_fetch_20250910', name: 'web_fetch', max_uses: 5 },
      { type: 'web_search_20250305', name: 'web_search', max_uses: 5, cache_control: { type: 'ephemeral', ttl: '1h' } },
    ]);
    expect(SERVER_TOOL_DEFINITIONS.web_search).toEqual({ type: 'web_search_20250305', name: 'web_search', max_uses: 5 });
    expect(params.tool_choice).toBeUndefined();
    const continuation = await buildMessagesRequest(
      makeJob({ purpose: LlmRequestPurpose.CONTINUATION, toolNames: ['bash'], serverTools: [ServerTool.WEB_SEARCH] }),
      options,
    );
    expect(toolNames(continuation)).toEqual(['bash', 'web_search']);
    expect(continuation.tool_choice).toBeUndefined();
    // Without a system prompt the last tool (a server tool here) carries the prefix breakpoint.
    const noSystem = await buildMessagesRequest(makeJob({ systemPrompt: '', serverTools: [ServerTool.WEB_SEARCH] }), options);
    expect(noSystem.tools?.at(-1)).toEqual({
      type: 'web_search_20250305',
      name: 'web_search',
      max_uses: 5,
      cache_control: { type: 'ephemeral', ttl: '1h' },
    });
    // Not asked for: none.
    expect(toolNames(await buildMessagesRequest(makeJob(), options))).toEqual(['bash', 'think']);
  });

  it('uses the job max_tokens, else the default, never above the model output limit', async () => {
    expect((await buildMessagesRequest(makeJob({ maxTokens: 1234 }), options)).max_tokens).toBe(1234);
    expect((await buildMessagesRequest(makeJob(), options)).max_tokens).toBe(16_000);
    expect((await buildMessagesRequest(makeJob({ maxTokens: 999_999 }), options)).max_tokens).toBe(64_000);
    expect((await buildMessagesRequest(makeJob({ model: '' }), runOptions({ defaultModel: 'bedrock-offline' }))).model).toBe(
      'bedrock-offline',
    );
  });

  it('a history ending in a cut response (not a paused one) is continued from a user turn: no prefill', async () => {
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
      { type: 'text', text: 'Mode changed.', cache_control: { type: 'ephemeral', ttl: '1h' } },
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
    const marked = params.messages.flatMap((m, i) =>
      (m.content as Array<{ cache_control?: unknown }>).flatMap((b, j) => (b.cache_control ? [`${i}.${j}`] : [])),
    );
    expect(marked).toEqual(['2.1', '4.0']);
    const noSystem = await buildMessagesRequest(makeJob({ systemPrompt: '' }), options);
    expect(noSystem.system).toBeUndefined();
    expect(noSystem.tools?.at(-1)?.cache_control).toEqual({ type: 'ephemeral', ttl: '1h' });
  });

  it('encodes images as base64 sources; one that cannot be sent becomes a note naming it, so the turn goes on', async () => {
    const png = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#123456' } })
      .png()
      .toBuffer();
    const params = await buildMessagesRequest(
      makeJob({ messages: [{ role: Role.USER, content: [text('look'), image('image/png', png)] }] }),
      options,
    );
    expect(params.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      {
        type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: png.toString('base64') },
        cache_control: { type: 'ephemeral', ttl: '1h' },
      },
    ]);
    const bad = makeJob({
      messages: [{ role: Role.USER, content: [image('image/png', png), image('image/png', Buffer.from('garbage'))] }],
    });
    const removed: RemovedImage[] = [];
    const built = await buildMessagesRequest(bad, options, { onImageRemoved: (r) => removed.push(r) });
    const blocks = built.messages[0]!.content as Array<{ type: string; text?: string }>;
    expect(blocks.map((b) => b.type)).toEqual(['image', 'text']);
    expect(blocks[1]!.text).toMatch(
      /^\[image removed: it could not be sent to the model: image 2 of message 1 could not be decoded as image\/png: .*\]$/,
    );
    expect(removed).toEqual([expect.objectContaining({ label: 'image 2 of message 1', by: 'gateway' })]);
  });

  it('sends the note for an image the provider refused before, and replaces refused images in a built request', async () => {
    const png = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#654321' } })
      .png()
      .toBuffer();
    const other = await sharp({ create: { width: 20, height: 10, channels: 3, background: '#111111' } })
      .png()
      .toBuffer();
    const refusedImages = new RefusedImages();
    const job = makeJob({ messages: [{ role: Role.USER, content: [text('look'), image('image/png', png), image('image/png', other)] }] });
    const params = await buildMessagesRequest(job, { ...options, refusedImages });
    // The provider names the second block of the first message: it becomes the note, keeps no image, and is remembered.
    expect(replaceRefusedImages(params, { at: { message: 0, block: 1 }, reason: 'too big' }, refusedImages)).toEqual([
      { label: 'messages.0.content.1', reason: 'too big', by: 'provider' },
    ]);
    expect((params.messages[0]!.content as Array<{ type: string }>).map((b) => b.type)).toEqual(['text', 'text', 'image']);
    expect(countImages(params)).toBe(1);
    // A block that is not an image is left alone.
    expect(replaceRefusedImages(params, { at: { message: 0, block: 0 }, reason: 'x' })).toEqual([]);
    // The next build sends the note at once, with the cache breakpoint where it was.
    const again = await buildMessagesRequest(job, { ...options, refusedImages });
    expect(again.messages[0]!.content).toEqual([
      { type: 'text', text: 'look' },
      { type: 'text', text: '[image removed: the model provider refused it: too big]' },
      {
        type: 'image',
        source: { type: 'base64', media_type: 'image/png', data: other.toString('base64') },
        cache_control: { type: 'ephemeral', ttl: '1h' },
      },
    ]);
    // Not named: every image goes, and none is remembered.
    expect(replaceRefusedImages(again, { reason: 'Could not process image' }, refusedImages).map((r) => r.label)).toEqual([
      'messages.0.content.2',
    ]);
    expect(again.messages[0]!.content.at(-1)).toEqual({
      type: 'text',
      text: '[image removed: the model provider refused it: Could not process image]',
      cache_control: { type: 'ephemeral', ttl: '1h' },
    });
    expect(refusedImages.get(other.toString('base64'))).toBeUndefined();
  });

  it("reads the Messages API's image refusals", () => {
    expect(
      parseImageRefusal('messages.2.content.1.image.source.base64: image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes'),
    ).toEqual({
      at: { message: 2, block: 1 },
      reason: 'image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes',
    });
    expect(parseImageRefusal('messages.0.content.3.content.1.image.source.base64.data: Could not process image')).toEqual({
      at: { message: 0, block: 3, nested: 1 },
      reason: 'Could not process image',
    });
    expect(parseImageRefusal('Could not process image')).toEqual({ reason: 'Could not process image' });
    expect(parseImageRefusal('max_tokens: Input should be less than 64000')).toBeUndefined();
  });

  it('rejects unknown tools and histories that cannot be sent', async () => {
    await expect(buildMessagesRequest(makeJob({ toolNames: ['rm_rf'] }), options)).rejects.toThrow(InvalidJobError);
    await expect(buildMessagesRequest(makeJob({ messages: [] }), options)).rejects.toThrow(/no messages/);
    await expect(buildMessagesRequest(makeJob({ messages: [{ role: Role.ASSISTANT, content: [text('hi')] }] }), options)).rejects.toThrow(
      /start with a user/,
    );
  });
});
