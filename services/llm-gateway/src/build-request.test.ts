import { describe, it, expect } from '@jest/globals';
import sharp from 'sharp';
import type Anthropic from '@anthropic-ai/sdk';
import { create } from '@bufbuild/protobuf';
import { ContentBlockSchema, LlmRequestPurpose, Role, ServerTool, ThinkingLevel } from '@bedrock/contracts';
import { compactionHeaders } from './compaction.ts';
import { createModelRegistry } from '@bedrock/contracts/models';
import { TOOLS } from '@bedrock/contracts/tools';
import {
  CONTINUE_AFTER_CUT,
  buildMessagesRequest,
  countImages,
  EMPTY_TOOL_RESULT,
  InvalidJobError,
  MAX_CACHE_BREAKPOINTS,
  replaceRefusedImages,
  SERVER_TOOL_DEFINITIONS,
  type RemovedImage,
} from './build-request.ts';
import { parseImageRefusal, RefusedImages } from './images.ts';
import {
  citedText,
  image,
  makeJob,
  redactedThinking,
  runOptions,
  serverTool,
  text,
  thinking,
  toolResult,
  toolUse,
} from '../test/helpers.ts';

const options = runOptions();
/** The names of the tools a request defines (client and server tools). */
const toolNames = (params: Anthropic.MessageCreateParamsStreaming) => params.tools?.map((t) => (t as { name: string }).name);

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

const cache = (b: unknown) => (b as { cache_control?: unknown }).cache_control;
/** Every block of the request that carries a cache breakpoint: "system", "tools.N" or "M.B". */
function breakpoints(params: Anthropic.MessageCreateParamsStreaming): string[] {
  return [
    ...((params.system as Anthropic.TextBlockParam[] | undefined) ?? []).flatMap((b, i) => (cache(b) ? [`system.${i}`] : [])),
    ...(params.tools ?? []).flatMap((t, i) => (cache(t) ? [`tools.${i}`] : [])),
    ...params.messages.flatMap((m, i) => (m.content as unknown[]).flatMap((b, j) => (cache(b) ? [`${i}.${j}`] : []))),
  ];
}

const searchUse = { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'bedrock release date' } };
const searchResult = {
  type: 'web_search_tool_result',
  tool_use_id: 'srvtoolu_01',
  content: [
    {
      type: 'web_search_result',
      url: 'https://example.com/r',
      title: 'Release',
      encrypted_content: 'EqgfCioIARgBIiQ3YTAwMjY1Mi1',
      page_age: null,
    },
  ],
};
const citation = {
  type: 'web_search_result_location',
  url: 'https://example.com/r',
  title: 'Release',
  encrypted_index: 'Eo8BCioIAhgBIiQyYjQ0OWJmZi1',
  cited_text: 'Released in May.',
};

describe("buildMessagesRequest: the model's own blocks", () => {
  it('sends thinking, redacted thinking, server tool blocks and citations back verbatim, in their order', async () => {
    const job = makeJob({
      thinking: ThinkingLevel.HIGH,
      model: 'claude-opus-5',
      serverTools: [ServerTool.WEB_SEARCH],
      messages: [
        { role: Role.USER, content: [text('when was it released?')] },
        {
          role: Role.ASSISTANT,
          content: [
            thinking('I should search.', 'EuYBCkQYAiJA'),
            redactedThinking('EmwKAhgBEgy3va3pzix'),
            serverTool(searchUse),
            serverTool(searchResult),
            citedText('It was released in May.', [citation]),
            text(' '),
            thinking('', 'EmptyDisplaySig'),
            toolUse('toolu_1', 'bash', { command: 'date' }),
          ],
        },
        { role: Role.USER, content: [toolResult('toolu_1', 'Mon')] },
      ],
    });
    const params = await buildMessagesRequest(job, options);
    expect(params.messages[1]!.content).toEqual([
      { type: 'thinking', thinking: 'I should search.', signature: 'EuYBCkQYAiJA' },
      { type: 'redacted_thinking', data: 'EmwKAhgBEgy3va3pzix' },
      searchUse,
      searchResult,
      { type: 'text', text: 'It was released in May.', citations: [citation] },
      { type: 'thinking', thinking: '', signature: 'EmptyDisplaySig' },
      { type: 'tool_use', id: 'toolu_1', name: 'bash', input: { command: 'date' } },
    ]);
    // The tool loop's assistant turn starts with thinking: thinking stays on.
    expect(params.thinking).toEqual({ type: 'adaptive', display: 'summarized' });
  });

  it('turns the blocks of a server tool turned off since into text notes, and drops the citations into them, in a continuation too', async () => {
    const history = [
      { role: Role.USER, content: [text('when was it released?')] },
      {
        role: Role.ASSISTANT,
        content: [serverTool(searchUse), serverTool(searchResult), citedText('It was released in May.', [citation])],
      },
      { role: Role.USER, content: [text('thanks; now without the web')] },
    ];
    const params = await buildMessagesRequest(makeJob({ messages: history }), options);
    expect(toolNames(params)).not.toContain('web_search');
    expect(params.messages[1]!.content).toEqual([
      { type: 'text', text: '[Earlier web_search call, a tool now turned off: {"query":"bedrock release date"}]' },
      { type: 'text', text: '[Its result: Release (https://example.com/r)]' },
      { type: 'text', text: 'It was released in May.' },
    ]);
    // A continuation summary is sent as a turn is (the same prefix, read from the cache): the same notes.
    const summary = await buildMessagesRequest(makeJob({ purpose: LlmRequestPurpose.CONTINUATION, messages: history }), options);
    expect(toolNames(summary)).not.toContain('web_search');
    expect(summary.messages).toEqual((await buildMessagesRequest(makeJob({ messages: history }), options)).messages);
  });

  it('rejects a stored server tool block that is not a JSON object, in a sentence', async () => {
    const broken = makeJob({
      messages: [
        { role: Role.USER, content: [text('q')] },
        {
          role: Role.ASSISTANT,
          content: [
            {
              ...serverTool(searchUse),
              block: { case: 'serverTool', value: { blockType: 'server_tool_use', blockJson: '{"type":' } },
            } as ReturnType<typeof text>,
          ],
        },
        { role: Role.USER, content: [text('go on')] },
      ],
    });
    const err = await buildMessagesRequest(broken, options).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(InvalidJobError);
    expect((err as Error).message).toBe(
      'Block 1 of message 2 (server_tool_use) is not a JSON object, so it cannot be sent back to the model.',
    );
  });

  it('sends text whose stored citations cannot be read without them, and says so', async () => {
    const job = makeJob({
      messages: [
        { role: Role.USER, content: [text('q')] },
        {
          role: Role.ASSISTANT,
          content: [
            { ...text('cited'), block: { case: 'text', value: { text: 'cited', citationsJson: 'not json' } } } as ReturnType<typeof text>,
          ],
        },
        { role: Role.USER, content: [text('more')] },
      ],
    });
    const dropped: string[] = [];
    const params = await buildMessagesRequest(job, options, { onCitationsDropped: (l) => dropped.push(l) });
    expect(params.messages[1]!.content).toEqual([{ type: 'text', text: 'cited' }]);
    expect(dropped).toEqual(['block 1 of message 2']);
  });

  it('resumes a paused turn (server tool blocks) by sending it as it is, trailing whitespace of its final text trimmed', async () => {
    const job = makeJob({
      serverTools: [ServerTool.WEB_SEARCH],
      messages: [
        { role: Role.USER, content: [text('search for it')] },
        {
          role: Role.ASSISTANT,
          content: [text('Searching. '), serverTool(searchUse), serverTool(searchResult), text('Found one; checking more   \n')],
        },
      ],
    });
    const params = await buildMessagesRequest(job, options);
    expect(params.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(params.messages[1]!.content).toEqual([
      { type: 'text', text: 'Searching. ' },
      searchUse,
      searchResult,
      { type: 'text', text: 'Found one; checking more', cache_control: { type: 'ephemeral', ttl: '1h' } },
    ]);
    // Ending with the provider's result block: nothing to trim, and the breakpoint goes to the nearest earlier text.
    const atResult = await buildMessagesRequest(
      makeJob({
        serverTools: [ServerTool.WEB_SEARCH],
        messages: [
          job.messages[0]!,
          { role: Role.ASSISTANT, content: [text('Searching.'), serverTool(searchUse), serverTool(searchResult)] },
        ],
      }),
      options,
    );
    expect(atResult.messages[1]!.content).toEqual([
      { type: 'text', text: 'Searching.', cache_control: { type: 'ephemeral', ttl: '1h' } },
      searchUse,
      searchResult,
    ]);
    expect(atResult.messages).toHaveLength(2);
  });

  it('never puts a cache breakpoint on thinking or server tool blocks, and never more than four', async () => {
    const job = makeJob({
      thinking: ThinkingLevel.HIGH,
      model: 'claude-opus-5',
      serverTools: [ServerTool.WEB_SEARCH],
      messages: [
        { role: Role.USER, content: [text('one')] },
        { role: Role.ASSISTANT, content: [text('two')] },
        { role: Role.USER, content: [text('search it')] },
        { role: Role.ASSISTANT, content: [thinking('t', 'sig'), serverTool(searchUse), serverTool(searchResult)] },
      ],
    });
    const params = await buildMessagesRequest(job, options);
    // System, the previous user turn, and — the paused turn having nothing cacheable — the user turn before it.
    expect(breakpoints(params)).toEqual(['system.0', 'tools.2', '0.0', '2.0']);
    for (const m of params.messages)
      for (const b of m.content as Array<{ type: string }>)
        if (b.type !== 'text' && b.type !== 'tool_result') expect(cache(b)).toBeUndefined();

    // Histories of every shape: at most four, none on the model's own blocks.
    const shapes = [
      [text('a')],
      [thinking('x', 's')],
      [redactedThinking('r')],
      [serverTool(searchUse), serverTool(searchResult)],
      [thinking('x', 's'), toolUse('toolu_q', 'bash', { command: 'ls' })],
    ];
    for (const assistant of shapes) {
      for (const systemPrompt of ['', 'sys']) {
        const messages = [
          { role: Role.USER, content: [text('u1')] },
          { role: Role.ASSISTANT, content: assistant },
          { role: Role.USER, content: assistant.some((b) => b.block.case === 'toolUse') ? [toolResult('toolu_q', 'out')] : [text('u2')] },
          { role: Role.ASSISTANT, content: assistant.filter((b) => b.block.case !== 'toolUse') },
        ];
        const built = await buildMessagesRequest(makeJob({ systemPrompt, serverTools: [ServerTool.WEB_SEARCH], messages }), options);
        const marks = breakpoints(built);
        expect(marks.length).toBeGreaterThanOrEqual(1);
        expect(marks.length).toBeLessThanOrEqual(MAX_CACHE_BREAKPOINTS);
        for (const m of built.messages) {
          for (const b of m.content as Array<{ type: string }>) {
            if (['thinking', 'redacted_thinking', 'server_tool_use', 'web_search_tool_result'].includes(b.type))
              expect(cache(b)).toBeUndefined();
          }
        }
      }
    }
  });
});

describe('buildMessagesRequest: thinking', () => {
  const levels: Array<[ThinkingLevel, string]> = [
    [ThinkingLevel.LOW, 'low'],
    [ThinkingLevel.MEDIUM, 'medium'],
    [ThinkingLevel.HIGH, 'high'],
    [ThinkingLevel.MAX, 'max'],
  ];
  it.each(levels)('adaptive models get thinking adaptive (summarized) and the effort of level %i (%s)', async (level, effort) => {
    for (const model of ['claude-opus-5', 'claude-sonnet-4-6', 'bedrock-offline']) {
      const params = await buildMessagesRequest(makeJob({ model, thinking: level }), options);
      expect(params.thinking).toEqual({ type: 'adaptive', display: 'summarized' });
      expect(params.output_config).toEqual({ effort });
      expect(params.max_tokens).toBe(16_000);
    }
  });

  it('budget models get a token budget by level, max_tokens raised to budget + 4 096 within the model limit', async () => {
    const budget = async (level: ThinkingLevel, extra: Parameters<typeof makeJob>[0] = {}) => {
      const p = await buildMessagesRequest(makeJob({ model: 'claude-sonnet-4-5', thinking: level, ...extra }), options);
      expect(p.output_config).toBeUndefined();
      return [p.thinking, p.max_tokens];
    };
    expect(await budget(ThinkingLevel.LOW)).toEqual([{ type: 'enabled', budget_tokens: 4_000 }, 16_000]);
    expect(await budget(ThinkingLevel.MEDIUM)).toEqual([{ type: 'enabled', budget_tokens: 10_000 }, 16_000]);
    expect(await budget(ThinkingLevel.HIGH)).toEqual([{ type: 'enabled', budget_tokens: 24_000 }, 28_096]);
    expect(await budget(ThinkingLevel.MAX)).toEqual([{ type: 'enabled', budget_tokens: 48_000 }, 52_096]);
    // A larger max_tokens is kept (a cut tool call asked again at the model limit).
    expect(await budget(ThinkingLevel.MAX, { maxTokens: 64_000 })).toEqual([{ type: 'enabled', budget_tokens: 48_000 }, 64_000]);
  });

  it('clamps the budget to max_tokens − 4 096 and at least 1 024; a model with no room gets no thinking', async () => {
    const registry = createModelRegistry({
      small: { contextWindow: 100_000, maxOutputTokens: 8_192, thinking: 'budget' },
      tiny: { contextWindow: 100_000, maxOutputTokens: 4_096, thinking: 'budget' },
      minute: { contextWindow: 100_000, maxOutputTokens: 1_024, thinking: 'budget' },
    });
    const opts = runOptions({ registry });
    const build = (model: string) => buildMessagesRequest(makeJob({ model, thinking: ThinkingLevel.HIGH }), opts);
    expect([(await build('small')).thinking, (await build('small')).max_tokens]).toEqual([
      { type: 'enabled', budget_tokens: 4_096 },
      8_192,
    ]);
    expect([(await build('tiny')).thinking, (await build('tiny')).max_tokens]).toEqual([{ type: 'enabled', budget_tokens: 1_024 }, 4_096]);
    const omitted: string[] = [];
    const minute = await buildMessagesRequest(makeJob({ model: 'minute', thinking: ThinkingLevel.LOW }), opts, {
      onThinkingOmitted: (r) => omitted.push(r),
    });
    expect([minute.thinking, minute.max_tokens]).toEqual([undefined, 1_024]);
    expect(omitted).toEqual(["the model's output limit (1024 tokens) leaves no room for a thinking budget of at least 1024 tokens"]);
  });

  it('sends no thinking when it is off or unset, for models that cannot think and for unknown models', async () => {
    const registry = createModelRegistry({ plain: { contextWindow: 100_000, maxOutputTokens: 8_192 } });
    const cases: Array<[string, ThinkingLevel]> = [
      ['claude-opus-5', ThinkingLevel.OFF],
      ['claude-opus-5', ThinkingLevel.UNSPECIFIED],
      ['claude-haiku-4-5', ThinkingLevel.OFF],
      ['plain', ThinkingLevel.HIGH],
      ['not-in-the-registry', ThinkingLevel.HIGH],
    ];
    for (const [model, level] of cases) {
      const params = await buildMessagesRequest(makeJob({ model, thinking: level }), runOptions({ registry }));
      expect([model, params.thinking, params.output_config]).toEqual([model, undefined, undefined]);
    }
  });

  it('leaves thinking out of a tool loop whose assistant turn does not start with thinking (it was off), until a plain user turn', async () => {
    const loop = (assistant: ReturnType<typeof text>[], last = [toolResult('toolu_1', 'done')]) =>
      makeJob({
        model: 'claude-sonnet-4-5',
        thinking: ThinkingLevel.MEDIUM,
        messages: [
          { role: Role.USER, content: [text('do it')] },
          { role: Role.ASSISTANT, content: assistant },
          { role: Role.USER, content: last },
        ],
      });
    const omitted: string[] = [];
    const hooks = { onThinkingOmitted: (r: string) => omitted.push(r) };
    const without = await buildMessagesRequest(loop([text('Running.'), toolUse('toolu_1', 'bash', { command: 'ls' })]), options, hooks);
    expect([without.thinking, without.output_config]).toEqual([undefined, undefined]);
    expect(omitted).toEqual(['the tool calls it answers were made in a turn without thinking']);
    // Tool results with a notice after them: still a tool loop (results come first).
    const withNotice = await buildMessagesRequest(
      loop([toolUse('toolu_1', 'bash', { command: 'ls' })], [text('[System notice] x'), toolResult('toolu_1', 'done')]),
      options,
    );
    expect(withNotice.thinking).toBeUndefined();
    // The turn started with thinking (or redacted thinking): on.
    expect(
      (await buildMessagesRequest(loop([thinking('plan', 'sig'), toolUse('toolu_1', 'bash', { command: 'ls' })]), options)).thinking,
    ).toEqual({ type: 'enabled', budget_tokens: 10_000 });
    expect(
      (await buildMessagesRequest(loop([redactedThinking('r'), toolUse('toolu_1', 'bash', { command: 'ls' })]), options)).thinking,
    ).toEqual({ type: 'enabled', budget_tokens: 10_000 });
    // A new user message after a turn without thinking: on again.
    expect((await buildMessagesRequest(loop([text('Hello.')], [text('next question')]), options)).thinking).toEqual({
      type: 'enabled',
      budget_tokens: 10_000,
    });
    // The same rule for budget models.
    const budget = await buildMessagesRequest(
      { ...loop([toolUse('toolu_1', 'bash', { command: 'ls' })]), model: 'claude-haiku-4-5' },
      options,
    );
    expect([budget.thinking, budget.max_tokens]).toEqual([undefined, 16_000]);
  });

  it('leaves thinking out when resuming a paused turn that does not start with thinking', async () => {
    const paused = (first: ReturnType<typeof text>[]) =>
      makeJob({
        model: 'claude-sonnet-4-5',
        thinking: ThinkingLevel.HIGH,
        serverTools: [ServerTool.WEB_SEARCH],
        messages: [
          { role: Role.USER, content: [text('search')] },
          { role: Role.ASSISTANT, content: [...first, serverTool(searchUse), serverTool(searchResult)] },
        ],
      });
    expect((await buildMessagesRequest(paused([]), options)).thinking).toBeUndefined();
    expect((await buildMessagesRequest(paused([thinking('t', 's')]), options)).thinking).toEqual({
      type: 'enabled',
      budget_tokens: 24_000,
    });
  });
});

describe('the model, round two', () => {
  const loop = (model: string, level: ThinkingLevel) =>
    makeJob({
      model,
      thinking: level,
      messages: [
        { role: Role.USER, content: [text('do it')] },
        // An adaptive model may choose not to think: the turn has no thinking block.
        { role: Role.ASSISTANT, content: [text('Running.'), toolUse('toolu_1', 'bash', { command: 'ls' })] },
        { role: Role.USER, content: [toolResult('toolu_1', 'done')] },
      ],
    });

  it('keeps an adaptive model’s thinking and effort on a tool-loop turn that carries no thinking block', async () => {
    const omitted: string[] = [];
    const params = await buildMessagesRequest(loop('claude-opus-5', ThinkingLevel.LOW), options, {
      onThinkingOmitted: (r) => omitted.push(r),
    });
    expect(params.thinking).toEqual({ type: 'adaptive', display: 'summarized' });
    expect(params.output_config).toEqual({ effort: 'low' });
    expect(omitted).toEqual([]);
  });

  it('still leaves a budget model’s thinking out where the API rejects it, flagging only the first request of the loop', async () => {
    const seen: Array<[string, boolean]> = [];
    const params = await buildMessagesRequest(loop('claude-sonnet-4-5', ThinkingLevel.HIGH), options, {
      onThinkingOmitted: (r, first) => seen.push([r, first]),
    });
    expect(params.thinking).toBeUndefined();
    expect(seen).toEqual([['the tool calls it answers were made in a turn without thinking', true]]);
    const later = makeJob({
      model: 'claude-sonnet-4-5',
      thinking: ThinkingLevel.HIGH,
      messages: [
        { role: Role.USER, content: [text('do it')] },
        { role: Role.ASSISTANT, content: [toolUse('toolu_1', 'bash', { command: 'ls' })] },
        { role: Role.USER, content: [toolResult('toolu_1', 'done')] },
        { role: Role.ASSISTANT, content: [toolUse('toolu_2', 'bash', { command: 'pwd' })] },
        { role: Role.USER, content: [toolResult('toolu_2', 'done')] },
      ],
    });
    seen.length = 0;
    await buildMessagesRequest(later, options, { onThinkingOmitted: (r, first) => seen.push([r, first]) });
    expect(seen.map(([, first]) => first)).toEqual([false]);
  });

  it('sends xhigh to models that take it and the nearest effort below to those that do not', async () => {
    const effort = async (model: string) =>
      (await buildMessagesRequest(makeJob({ model, thinking: ThinkingLevel.XHIGH }), options)).output_config;
    expect(await effort('claude-opus-5')).toEqual({ effort: 'xhigh' });
    expect(await effort('claude-opus-4-6')).toEqual({ effort: 'high' });
  });

  it('places four breakpoints — tools, system, previous user turn, end — each with its TTL, longer ones first', async () => {
    const job = makeJob({
      model: 'claude-opus-5',
      messages: [
        { role: Role.USER, content: [text('first')] },
        { role: Role.ASSISTANT, content: [text('answer')] },
        { role: Role.USER, content: [text('second')] },
      ],
    });
    const marks = (p: Anthropic.MessageCreateParamsStreaming) => [
      ...(p.tools ?? []).flatMap((t, i) => (cache(t) ? [[`tools.${i}`, cache(t)]] : [])),
      ...((p.system as Anthropic.TextBlockParam[]) ?? []).flatMap((b, i) => (cache(b) ? [[`system.${i}`, cache(b)]] : [])),
      ...p.messages.flatMap((m, i) => (m.content as unknown[]).flatMap((b, j) => (cache(b) ? [[`messages.${i}.${j}`, cache(b)]] : []))),
    ];
    const h1 = { type: 'ephemeral', ttl: '1h' };
    const m5 = { type: 'ephemeral', ttl: '5m' };
    const params = await buildMessagesRequest(job, options);
    expect(marks(params)).toEqual([
      ['tools.1', h1],
      ['system.0', h1],
      ['messages.0.0', h1],
      ['messages.2.0', h1],
    ]);
    expect(marks(params).length).toBeLessThanOrEqual(MAX_CACHE_BREAKPOINTS);
    const mixed = await buildMessagesRequest(job, { ...options, cacheTtls: { tools: '1h', system: '5m', messages: '5m' } });
    expect(marks(mixed).map(([, c]) => c)).toEqual([h1, m5, m5, m5]);
    // A 1h breakpoint after a 5m one would break the provider's order: the earlier one is sent as 1h.
    const upgraded = await buildMessagesRequest(job, { ...options, cacheTtls: { tools: '5m', system: '5m', messages: '1h' } });
    expect(marks(upgraded).map(([, c]) => c)).toEqual([h1, h1, h1, h1]);
  });

  it('sends the job’s owner reference as metadata.user_id, and none without one', async () => {
    const ref = 'a3f1'.repeat(16);
    expect((await buildMessagesRequest(makeJob({ ownerRef: ref }), options)).metadata).toEqual({ user_id: ref });
    expect((await buildMessagesRequest(makeJob(), options)).metadata).toBeUndefined();
  });

  it('defines the web tools in the version the model takes', async () => {
    const types = async (model: string) =>
      (await buildMessagesRequest(makeJob({ model, serverTools: [ServerTool.WEB_SEARCH, ServerTool.WEB_FETCH] }), options)).tools
        ?.slice(-2)
        .map((t) => (t as { type: string }).type);
    expect(await types('claude-opus-5')).toEqual(['web_search_20260209', 'web_fetch_20260209']);
    expect(await types('claude-haiku-4-5')).toEqual(['web_search_20250305', 'web_fetch_20250910']);
  });
});

describe('buildMessagesRequest: server-side compaction', () => {
  const registry = createModelRegistry({
    small: { contextWindow: 200_000, maxOutputTokens: 8_192, thinking: 'adaptive', compaction: true },
  });
  const opts = runOptions({ registry });

  it('asks for compaction at 80% of the window (at least 50 000 tokens) only for models whose registry entry says so', async () => {
    const params = await buildMessagesRequest(makeJob({ model: 'small' }), opts);
    expect((params as unknown as { context_management: unknown }).context_management).toEqual({
      edits: [{ type: 'compact_20260112', trigger: { type: 'input_tokens', value: 160_000 } }],
    });
    expect(compactionHeaders(params)).toEqual({ 'anthropic-beta': 'compact-2026-01-12' });
    // A continuation summary of the same model carries it too: the request's form never changes.
    const summary = await buildMessagesRequest(makeJob({ model: 'small', purpose: LlmRequestPurpose.CONTINUATION }), opts);
    expect((summary as unknown as { context_management: unknown }).context_management).toBeDefined();
    expect(createModelRegistry().lookup('claude-sonnet-4-5').compaction).toBeUndefined();
    expect(createModelRegistry().lookup('claude-sonnet-4-6').compaction).toBe(true);
    const plain = await buildMessagesRequest(makeJob({ model: 'claude-sonnet-4-5' }), opts);
    expect('context_management' in plain).toBe(false);
    expect(compactionHeaders(plain)).toBeUndefined();
  });

  it('sends a stored compaction block back verbatim, and keeps thinking on when the turn starts with it', async () => {
    const block = { type: 'compaction', content: 'summary', encrypted_content: 'opaque', signature: 'sig' };
    const compaction = create(ContentBlockSchema, {
      block: { case: 'compaction', value: { content: 'summary', blockJson: JSON.stringify(block) } },
    });
    const history = [
      { role: Role.USER, content: [text('go')] },
      {
        role: Role.ASSISTANT,
        content: [
          compaction,
          create(ContentBlockSchema, { block: { case: 'thinking', value: { thinking: 't', signature: 's' } } }),
          toolUse('toolu_1', 'bash', { command: 'ls' }),
        ],
      },
      { role: Role.USER, content: [toolResult('toolu_1', 'ok')] },
    ];
    const omitted: string[] = [];
    const params = await buildMessagesRequest(makeJob({ model: 'small', thinking: ThinkingLevel.HIGH, messages: history }), opts, {
      onThinkingOmitted: (r) => omitted.push(r),
    });
    expect((params.messages[1]!.content as unknown[])[0]).toEqual(block);
    expect(omitted).toEqual([]);
    expect(params.thinking).toEqual({ type: 'adaptive', display: 'summarized' });
  });
});
