/** buildMessagesRequest: the model's own blocks (thinking, server tools, citations, compaction) sent back verbatim. */
import { describe, it, expect } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ContentBlockSchema, LlmRequestPurpose, Role, ServerTool, ThinkingLevel } from '@bedrock/contracts';
import { compactionHeaders } from './compaction.ts';
import { createModelRegistry } from '@bedrock/contracts/models';
import { buildMessagesRequest } from './build-request.ts';
import { InvalidJobError } from './build-options.ts';
import { MAX_CACHE_BREAKPOINTS } from './cache-breakpoints.ts';
import { citedText, makeJob, redactedThinking, runOptions, serverTool, text, thinking, toolResult, toolUse } from '../test/helpers.ts';
import { breakpoints, cache, citation, options, searchResult, searchUse, toolNames } from '../test/build-request-fixtures.ts';

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
