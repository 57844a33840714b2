/** buildMessagesRequest: thinking by model form and level, and the model's tool-loop, caching and metadata rules. */
import { describe, it, expect } from '@jest/globals';
import type Anthropic from '@anthropic-ai/sdk';
import { Role, ServerTool, ThinkingLevel } from '@bedrock/contracts';
import { createModelRegistry } from '@bedrock/contracts/models';
import { buildMessagesRequest } from './build-request.ts';
import { MAX_CACHE_BREAKPOINTS } from './cache-breakpoints.ts';
import { makeJob, redactedThinking, runOptions, serverTool, text, thinking, toolResult, toolUse } from '../test/helpers.ts';
import { cache, options, searchResult, searchUse } from '../test/build-request-fixtures.ts';

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
