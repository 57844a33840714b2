/** runLlmRequest: thinking, server tools and citations kept from the stream and sent back verbatim. */
import { describe, it, expect } from '@jest/globals';
import { LlmRequestPurpose, Role, ServerTool, StopReason, ThinkingLevel, TokenDeltaKind } from '@bedrock/contracts';
import { CONTINUE_AFTER_CUT } from '../src/build-request.ts';
import { thinkingOmittedNotice, type LlmRequest } from '../src/run-llm-request.ts';
import { makeJob, text, toolResult, toolUse } from './helpers.ts';
import { response, run, runJob, useMessagesServer } from './run-llm-request-support.ts';

useMessagesServer();

describe('runLlmRequest: thinking, server tools and citations, kept and sent back verbatim', () => {
  const blocksOf = (body: { messages: ReadonlyArray<{ content: unknown }> } | undefined, at: number) =>
    body!.messages[at]!.content as Array<Record<string, unknown>>;
  const withoutCache = (blocks: Array<Record<string, unknown>>) => blocks.map(({ cache_control: _, ...b }) => b);

  it('keeps thinking with its signature, streams it as THINKING deltas, and sends it back first in the tool loop', async () => {
    const job = makeJob({ model: 'claude-opus-5', thinking: ThinkingLevel.HIGH, toolNames: ['bash'] });
    const first = await runJob(job, {
      kind: 'message',
      chunkChars: 6,
      content: [
        { type: 'thinking', thinking: 'The user wants the files listed.' },
        { type: 'text', text: 'Listing.' },
        { type: 'tool_use', id: 'toolu_t1', name: 'bash', input: { command: 'ls' } },
      ],
    });
    expect(first.sent).toMatchObject({
      thinking: { type: 'adaptive', display: 'summarized' },
      output_config: { effort: 'high' },
      max_tokens: 16_000,
    });
    const r = response(first.outcome);
    expect(r.content.map((b) => b.block.case)).toEqual(['thinking', 'text', 'toolUse']);
    const t = r.content[0]!.block.case === 'thinking' ? r.content[0]!.block.value : undefined;
    expect(t?.thinking).toBe('The user wants the files listed.');
    expect(t?.signature).not.toBe('');
    expect(
      first.deltas
        .filter(([, , k]) => k === TokenDeltaKind.THINKING)
        .map(([i, s]) => `${i}:${s}`)
        .join(''),
    ).toBe(
      'The user wants the files listed.'
        .match(/.{1,6}/g)!
        .map((s) => `0:${s}`)
        .join(''),
    );
    expect(first.deltas.filter(([, , k]) => k === TokenDeltaKind.TEXT)).toEqual([
      [1, 'Listin', TokenDeltaKind.TEXT],
      [1, 'g.', TokenDeltaKind.TEXT],
    ]);

    // The tool loop: the assistant turn goes back exactly as it came, thinking first, and thinking stays on.
    const loop = makeJob({
      model: 'claude-opus-5',
      thinking: ThinkingLevel.HIGH,
      toolNames: ['bash'],
      messages: [
        { role: Role.USER, content: [text('hello')] },
        { role: Role.ASSISTANT, content: r.content },
        { role: Role.USER, content: [toolResult('toolu_t1', 'a.txt')] },
      ],
    });
    const second = await runJob(loop, { kind: 'message', content: [{ type: 'text', text: 'One file.' }] });
    expect(response(second.outcome).content.map((b) => b.block.case)).toEqual(['text']);
    expect(blocksOf(second.sent, 1)).toEqual([
      { type: 'thinking', thinking: 'The user wants the files listed.', signature: t!.signature },
      { type: 'text', text: 'Listing.' },
      { type: 'tool_use', id: 'toolu_t1', name: 'bash', input: { command: 'ls' } },
    ]);
    expect(second.sent?.thinking).toEqual({ type: 'adaptive', display: 'summarized' });

    // The same loop from a turn without thinking (an adaptive model may choose not to think):
    // the configuration stays, with no warning and no notice.
    const warnings: string[] = [];
    const plain = await runJob(
      { ...loop, messages: [loop.messages[0]!, { ...loop.messages[1]!, content: r.content.slice(1) }, loop.messages[2]!] } as LlmRequest,
      { kind: 'message', content: [{ type: 'text', text: 'ok' }] },
      { onWarning: (m) => warnings.push(m) },
    );
    expect(response(plain.outcome).notices).toEqual([]);
    expect(plain.sent?.thinking).toEqual({ type: 'adaptive', display: 'summarized' });
    expect(plain.sent?.output_config).toEqual(second.sent?.output_config);
    expect(warnings).toEqual([]);

    // A budget model cannot take it: one notice for the user, no log line.
    const budget = await runJob(
      {
        ...loop,
        model: 'claude-haiku-4-5',
        messages: [loop.messages[0]!, { ...loop.messages[1]!, content: r.content.slice(1) }, loop.messages[2]!],
      } as LlmRequest,
      { kind: 'message', content: [{ type: 'text', text: 'ok' }] },
      { onWarning: (m) => warnings.push(m) },
    );
    expect(budget.sent?.thinking).toBeUndefined();
    expect(response(budget.outcome).notices).toEqual([
      thinkingOmittedNotice('the tool calls it answers were made in a turn without thinking'),
    ]);
    expect(warnings).toEqual([]);
  });

  it('gives budget models a thinking budget and reports the raised max_tokens it sent', async () => {
    const { outcome, sent } = await runJob(makeJob({ model: 'claude-haiku-4-5', thinking: ThinkingLevel.HIGH }), {
      kind: 'message',
      content: [
        { type: 'thinking', thinking: 'hm' },
        { type: 'text', text: 'ok' },
      ],
    });
    expect(sent).toMatchObject({ thinking: { type: 'enabled', budget_tokens: 24_000 }, max_tokens: 28_096 });
    expect(sent?.output_config).toBeUndefined();
    expect(response(outcome).maxTokens).toBe(28_096);
  });

  it('keeps redacted thinking with its data', async () => {
    const data = 'EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP';
    const r = response(
      (
        await run({
          kind: 'message',
          content: [
            { type: 'raw', start: { type: 'redacted_thinking', data } },
            { type: 'text', text: 'Answer.' },
          ],
        })
      ).outcome,
    );
    expect(r.content.map((b) => [b.block.case, b.block.value])).toEqual([
      ['redactedThinking', expect.objectContaining({ data })],
      ['text', expect.objectContaining({ text: 'Answer.', citationsJson: '' })],
    ]);
  });

  it('keeps server tool blocks and citations verbatim, and resumes a paused turn by sending it back as it is', async () => {
    const use = { type: 'server_tool_use', id: 'srvtoolu_01A', name: 'web_search', input: {} };
    const result = {
      type: 'web_search_tool_result',
      tool_use_id: 'srvtoolu_01A',
      content: [
        {
          type: 'web_search_result',
          url: 'https://example.com/bedrock',
          title: 'Bedrock',
          encrypted_content: 'EqgfCioIARgBIiQ3YTAwMjY1Mi1',
          page_age: 'May 2, 2026',
        },
      ],
    };
    const citation = {
      type: 'web_search_result_location',
      url: 'https://example.com/bedrock',
      title: 'Bedrock',
      encrypted_index: 'Eo8BCioIAhgBIiQyYjQ0OWJmZi1',
      cited_text: 'Bedrock shipped in May.',
    };
    const job = makeJob({ model: 'claude-opus-5', serverTools: [ServerTool.WEB_SEARCH], user: 'when did bedrock ship?' });
    const first = await runJob(job, {
      kind: 'message',
      stopReason: 'pause_turn',
      content: [
        {
          type: 'raw',
          start: use,
          deltas: [
            { type: 'input_json_delta', partial_json: '{"query": "bedrock' },
            { type: 'input_json_delta', partial_json: ' release"}' },
          ],
        },
        { type: 'raw', start: result },
        {
          type: 'raw',
          start: { type: 'text', text: '' },
          deltas: [
            { type: 'citations_delta', citation },
            { type: 'text_delta', text: 'It shipped in May; checking more ' },
          ],
        },
      ],
    });
    expect(first.sent?.tools?.at(-1)).toMatchObject({ name: 'web_search', max_uses: 5 });
    const r = response(first.outcome);
    expect(r.stopReason).toBe(StopReason.PAUSE_TURN);
    const filledUse = { ...use, input: { query: 'bedrock release' } };
    expect(
      r.content.map((b) =>
        b.block.case === 'serverTool'
          ? [b.block.value.blockType, JSON.parse(b.block.value.blockJson)]
          : b.block.case === 'text'
            ? [b.block.value.text, JSON.parse(b.block.value.citationsJson)]
            : b.block.case,
      ),
    ).toEqual([
      ['server_tool_use', filledUse],
      ['web_search_tool_result', result],
      ['It shipped in May; checking more ', [citation]],
    ]);

    // pause_turn: the history ends with the paused turn, sent back as it is (the trailing space trimmed), no user turn after it.
    const resume = makeJob({
      model: 'claude-opus-5',
      serverTools: [ServerTool.WEB_SEARCH],
      messages: [job.messages[0]!, { role: Role.ASSISTANT, content: r.content }],
    });
    const second = await runJob(resume, { kind: 'message', content: [{ type: 'text', text: ' Nothing more found.' }] });
    expect(response(second.outcome).content.map((b) => b.block.case)).toEqual(['text']);
    expect(second.sent?.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    expect(withoutCache(blocksOf(second.sent, 1))).toEqual([
      filledUse,
      result,
      { type: 'text', text: 'It shipped in May; checking more', citations: [citation] },
    ]);
  });

  it('reports thinking tokens and server tool calls in usage', async () => {
    const usage = {
      input_tokens: 900,
      output_tokens: 700,
      output_tokens_details: { thinking_tokens: 450 },
      server_tool_use: { web_search_requests: 2, web_fetch_requests: 1 },
    };
    const r = response((await run({ kind: 'message', content: [{ type: 'text', text: 'ok' }], usage, usageInDelta: true })).outcome);
    expect(r.usage).toMatchObject({
      inputTokens: 900n,
      outputTokens: 700n,
      thinkingTokens: 450n,
      webSearchRequests: 2n,
      webFetchRequests: 1n,
    });
  });

  it('reports a refusal with the explanation the provider gave, and the content that came before it', async () => {
    const r = response(
      (
        await run({
          kind: 'message',
          stopReason: 'refusal',
          stopExplanation: 'This request asks for help with a cyberattack.',
          content: [{ type: 'text', text: 'I can' }],
        })
      ).outcome,
    );
    expect([r.stopReason, r.stopExplanation]).toEqual([StopReason.REFUSAL, 'This request asks for help with a cyberattack.']);
    expect(r.content.map((b) => b.block.value)).toEqual([expect.objectContaining({ text: 'I can' })]);
    const silent = response((await run({ kind: 'message', stopReason: 'refusal', content: [] })).outcome);
    expect([silent.stopReason, silent.stopExplanation, silent.content]).toEqual([StopReason.REFUSAL, '', []]);
  });

  it('sends a continuation summary the tools as a turn does (no tool_choice: the cached prefix holds), and a cut response is continued from a user turn', async () => {
    const history = [
      { role: Role.USER, content: [text('run it')] },
      { role: Role.ASSISTANT, content: [toolUse('toolu_c1', 'bash', { command: 'ls' })] },
      { role: Role.USER, content: [toolResult('toolu_c1', 'a.txt')] },
      { role: Role.ASSISTANT, content: [text('The listing shows a.txt and ')] },
    ];
    const { outcome, sent } = await runJob(
      makeJob({ purpose: LlmRequestPurpose.CONTINUATION, toolNames: ['bash', 'think'], messages: history }),
      { kind: 'message', content: [{ type: 'text', text: 'Summary.' }] },
    );
    response(outcome);
    expect(sent?.tools?.map((t) => t.name)).toEqual(['bash', 'think']);
    expect(sent?.tool_choice).toBeUndefined();
    expect(blocksOf(sent, 4)).toEqual([expect.objectContaining({ type: 'text', text: CONTINUE_AFTER_CUT })]);
  });
});
