/**
 * Transition matrix, docs/state-machine.md "Responses"
 * (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { MAX_TOKENS_NOTICE, PAUSE_TURN_NOTICE, addUsage, cutToolNotice, transition, type ConversationEvent } from './index.ts';
import {
  DEFAULT_MAX_TOKENS,
  OUTPUT_LIMIT,
  bash,
  llmError,
  parentCtx,
  redactedBlock,
  response,
  searchBlocks,
  subCtx,
  thinkingBlock,
  timerFired,
  usage,
  userMessage,
} from '../../test/core-support/matrix-fixtures.ts';
import { type Row, persisted, notes, effectsOf, textOf, phase, runRow, cases, CITED } from '../../test/core-support/matrix-rows.ts';

// Responses (docs/state-machine.md, "Responses").
const DOC_RESPONSES: Row[] = [
  {
    label: "response carrying the gateway's notices → notify notice each (first), nothing persisted for them",
    setup: (c) => c.toLlm(),
    event: (c) => ({ ...response(c.requestId, { text: 'x' }), notices: ['Thinking left out', ''] }) as ConversationEvent,
    expect: {
      phase: 'idle',
      effects: ['notify', 'persist_message'],
      check: (r) => {
        expect(notes(r)).toEqual([{ kind: 'notice', text: 'Thinking left out' }]);
        // The model never sees it: only the agent message is persisted.
        expect(effectsOf(r, 'persist_message').map((e) => e.message.type)).toEqual(['agent']);
      },
    },
  },
  {
    label: 'stale response carrying notices → no-op (no notice)',
    setup: (c) => c.toLlm(),
    event: () => ({ ...response('not-the-request', { text: 'x' }), notices: ['n'] }) as ConversationEvent,
    expect: { noop: true },
  },
  {
    label: 'response: usage >= 80% → notify context_warning once',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', tokens: 800 }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(notes(r)[0]).toEqual({ kind: 'context_warning', usedTokens: 800, contextWindow: 1000 });
        expect(r.state.contextWarned).toBe(true);
      },
    },
  },
  {
    label: 'response: usage >= 80% again → no second warning',
    setup: (c) => c.toLlm().respond({ text: 'x', tokens: 810 }).toLlm(),
    event: (c) => response(c.requestId, { text: 'y', tokens: 850 }),
    expect: { phase: 'idle', effects: ['persist_message'] },
  },
  {
    label: 'response: usage 79.9% → no warning',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', tokens: 799 }),
    expect: { phase: 'idle', effects: ['persist_message'] },
  },
  {
    label: 'response: max_tokens, text cut → agent message (stopReason max_tokens), system notice, a new request_llm (attempt 1, new id)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { before: [thinkingBlock()], text: 'cut', stopReason: 'max_tokens' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r, _c, before) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p.attempt).toBe(1);
        expect(p.requestId).not.toBe(phase(before, 'llm_requesting').requestId);
        expect(p.autoContinuations).toBe(1);
        expect(p.maxTokens).toBe(0);
        const [agent] = persisted(r, 'agent');
        expect(agent).toMatchObject({ stopReason: 'max_tokens', content: [thinkingBlock(), { type: 'text', text: 'cut' }] });
        expect(persisted(r, 'system').map(textOf)).toEqual([MAX_TOKENS_NOTICE]);
        // The notice comes after the cut content, so the next request ends with a user turn.
        expect(r.effects.map((e) => (e.type === 'persist_message' ? e.message.type : e.type))).toEqual(['agent', 'system', 'request_llm']);
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ purpose: 'turn', maxTokens: 0 });
      },
    },
  },
  {
    label: 'response: max_tokens, text cut, maxAutoContinuations reached → idle, no notice',
    setup: (c) => {
      c.toLlm();
      for (let i = 0; i < 3; i++) c.respond({ text: `part ${i}`, stopReason: 'max_tokens' });
    },
    event: (c) => response(c.requestId, { text: 'part 3', stopReason: 'max_tokens' }),
    expect: { phase: 'idle', effects: ['persist_message'], check: (r) => expect(persisted(r, 'agent')[0]!.stopReason).toBe('max_tokens') },
  },
  {
    label:
      'response: pause_turn with server-tool blocks → agent message kept verbatim, a new request_llm, no notice (the paused turn is sent back as it is)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { before: [thinkingBlock(), ...searchBlocks()], text: 'Searching', stopReason: 'pause_turn' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'request_llm'],
      check: (r) => {
        expect(phase(r.state, 'llm_requesting').autoContinuations).toBe(1);
        expect(persisted(r, 'agent')[0]).toMatchObject({
          stopReason: 'pause_turn',
          content: [thinkingBlock(), ...searchBlocks(), { type: 'text', text: 'Searching' }],
        });
        expect(persisted(r, 'system')).toEqual([]);
      },
    },
  },
  {
    label: 'response: pause_turn without server-tool blocks → handled like a text cut (notice, a new request_llm)',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'part', stopReason: 'pause_turn' }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(persisted(r, 'system').map(textOf)).toEqual([PAUSE_TURN_NOTICE]),
    },
  },
  {
    label: 'response: pause_turn after maxAutoContinuations (3) → idle',
    setup: (c) => {
      c.toLlm();
      for (let i = 0; i < 3; i++) c.respond({ before: searchBlocks(`srv${i}`), text: `part ${i}`, stopReason: 'pause_turn' });
    },
    event: (c) => response(c.requestId, { before: searchBlocks('srv3'), text: 'part 3', stopReason: 'pause_turn' }),
    expect: { phase: 'idle', effects: ['persist_message'] },
  },
  {
    label: 'response: max_tokens with a cut tool call below the output limit → nothing persisted, request_llm at the limit',
    setup: (c) => c.toLlm(),
    event: (c) =>
      response(c.requestId, {
        before: [thinkingBlock()],
        text: 'Writing the file',
        stopReason: 'max_tokens',
        cut: ['patch'],
        maxTokens: DEFAULT_MAX_TOKENS,
      }),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => {
        const p = phase(r.state, 'llm_requesting');
        expect(p).toMatchObject({ attempt: 1, maxTokens: OUTPUT_LIMIT, autoContinuations: 1 });
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ requestId: p.requestId, purpose: 'turn', maxTokens: OUTPUT_LIMIT });
        // The tokens were spent all the same.
        expect(r.state.totalUsage).toEqual(usage(100));
      },
    },
  },
  {
    label: 'response: cut tool call, the gateway did not report max_tokens (0) → asked again at the limit, once',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { stopReason: 'max_tokens', cut: ['patch'], maxTokens: 0 }),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => expect(phase(r.state, 'llm_requesting').maxTokens).toBe(OUTPUT_LIMIT),
    },
  },
  {
    label: 'response: a retry after an error keeps the raised max_tokens',
    setup: (c) => {
      c.toLlm().respond({ stopReason: 'max_tokens', cut: ['patch'] });
      c.ok(llmError(c.requestId));
    },
    event: (c) => timerFired(c.timer('retry')),
    expect: {
      phase: 'llm_requesting',
      effects: ['request_llm'],
      check: (r) => {
        expect(phase(r.state, 'llm_requesting')).toMatchObject({ attempt: 2, maxTokens: OUTPUT_LIMIT });
        expect(effectsOf(r, 'request_llm')[0]).toMatchObject({ attempt: 2, maxTokens: OUTPUT_LIMIT });
      },
    },
  },
  {
    label:
      'response: cut tool call again at the output limit → complete blocks persisted, notice naming the call and the limit, a new request_llm',
    setup: (c) => c.toLlm().respond({ stopReason: 'max_tokens', cut: ['patch'] }),
    event: (c) =>
      response(c.requestId, {
        before: [thinkingBlock()],
        text: 'Writing',
        stopReason: 'max_tokens',
        cut: ['patch'],
        maxTokens: OUTPUT_LIMIT,
      }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => {
        expect(persisted(r, 'agent')[0]).toMatchObject({
          stopReason: 'max_tokens',
          content: [thinkingBlock(), { type: 'text', text: 'Writing' }],
        });
        const [notice] = persisted(r, 'system').map(textOf);
        expect(notice).toBe(cutToolNotice(['patch'], OUTPUT_LIMIT));
        expect(notice).toContain('patch');
        expect(notice).toContain(`${OUTPUT_LIMIT} tokens`);
        expect(notice).not.toContain('..');
        expect(phase(r.state, 'llm_requesting')).toMatchObject({ autoContinuations: 2, maxTokens: OUTPUT_LIMIT });
      },
    },
  },
  {
    label:
      'response: cut tool call at the limit with complete calls → the complete calls run; the notice waits in the history for their results',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [bash('b1')], stopReason: 'max_tokens', cut: ['patch', 'bash'], maxTokens: OUTPUT_LIMIT }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        expect(persisted(r, 'system').map(textOf)).toEqual([cutToolNotice(['patch', 'bash'], OUTPUT_LIMIT)]);
        expect(persisted(r, 'system').map(textOf)[0]).toMatch(/^Your calls to patch and bash were cut off/);
        expect(effectsOf(r, 'execute_tool')[0]!.toolUseId).toBe('b1');
      },
    },
  },
  {
    label: 'response: cut tool call when maxAutoContinuations is reached → not asked again: notice, then idle',
    ctx: () => parentCtx({ policy: { maxAutoContinuations: 1 } }),
    setup: (c) => c.toLlm().respond({ text: 'a', stopReason: 'max_tokens' }),
    event: (c) => response(c.requestId, { text: 'b', stopReason: 'max_tokens', cut: ['patch'] }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => expect(persisted(r, 'system').map(textOf)).toEqual([cutToolNotice(['patch'], DEFAULT_MAX_TOKENS)]),
    },
  },
  {
    label: 'response: cut tool call at >= 90% of the window → no retry: continuation summary',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'x', stopReason: 'max_tokens', cut: ['patch'], tokens: 950 }),
    expect: { phase: 'awaiting_continuation', effects: ['persist_message', 'request_llm'] },
  },
  {
    label: 'response: refusal (P) → agent message with stopReason and explanation, error message, idle',
    setup: (c) => c.toLlm(),
    event: (c) =>
      response(c.requestId, { text: 'I started to', stopReason: 'refusal', explanation: 'This request asks for harmful content' }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => {
        expect(persisted(r, 'agent')[0]).toMatchObject({
          stopReason: 'refusal',
          stopExplanation: 'This request asks for harmful content',
          content: [{ type: 'text', text: 'I started to' }],
        });
        const [error] = persisted(r, 'error').map(textOf);
        expect(error).toBe(
          'The model declined to answer: This request asks for harmful content. Rephrase your request or send a new message.',
        );
      },
    },
  },
  {
    label: 'response: refusal without content or explanation → the refusal is still recorded; tool calls in it do not run',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [bash('b1')], stopReason: 'refusal', explanation: 'Declined.' }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r) => {
        expect(persisted(r, 'error').map(textOf)).toEqual([
          'The model declined to answer: Declined. Rephrase your request or send a new message.',
        ]);
        expect(persisted(r, 'tool')).toEqual([]);
      },
    },
  },
  {
    label: 'response: refusal, no explanation → a sentence without one; the conversation takes a new message',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { stopReason: 'refusal' }),
    expect: {
      phase: 'idle',
      effects: ['persist_message', 'persist_message'],
      check: (r, c) => {
        expect(persisted(r, 'agent')[0]).toEqual({ type: 'agent', content: [], usage: usage(100), stopReason: 'refusal' });
        expect(persisted(r, 'error').map(textOf)).toEqual(['The model declined to answer. Rephrase your request or send a new message.']);
        expect(transition(r.state, c.ctx, userMessage('try this instead')).ok).toBe(true);
      },
    },
  },
  {
    label: 'response: refusal (S) → failed{refused} | notify_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { stopReason: 'refusal', explanation: 'no' }),
    expect: {
      phase: 'failed',
      effects: ['persist_message', 'persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed').errorKind).toBe('refused');
        expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, errorKind: 'refused' });
      },
    },
  },
  {
    label: 'response: thinking, redacted thinking and citations are kept verbatim, in order',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { before: [thinkingBlock('', 'sig-empty'), redactedBlock(), CITED], calls: [bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) =>
        expect(persisted(r, 'agent')[0]!.content).toEqual([
          thinkingBlock('', 'sig-empty'),
          redactedBlock(),
          CITED,
          { type: 'tool_use', id: 'b1', name: 'bash', input: { command: 'ls' } },
        ]),
    },
  },
  {
    label: 'response: usage counts thinking tokens and server-tool requests',
    setup: (c) => c.toLlm().respond({ text: 'a' }).toLlm(),
    event: (c) => ({
      ...(response(c.requestId, { text: 'b' }) as Extract<ConversationEvent, { type: 'llm_response' }>),
      usage: usage(300, { searches: 2, fetches: 1 }),
    }),
    expect: {
      phase: 'idle',
      effects: ['persist_message'],
      check: (r) => {
        expect(r.state.totalUsage).toMatchObject({
          thinkingTokens: usage(100).thinkingTokens! + usage(300).thinkingTokens!,
          webSearchRequests: 2,
          webFetchRequests: 1,
        });
      },
    },
  },
  {
    label: 'response: S ends its turn without submit_result → failed{…: <last text>, unknown} | notify_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'I am done' }),
    expect: {
      phase: 'failed',
      effects: ['persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'failed')).toEqual({
          kind: 'failed',
          error: 'Sub-agent ended its turn without calling submit_result: I am done',
          errorKind: 'unknown',
        });
        expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, errorKind: 'unknown' });
      },
    },
  },
  {
    label: 'response: empty content, end_turn → idle, nothing persisted',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, {}),
    expect: { phase: 'idle', effects: [] },
  },
  {
    label: 'response: lastUsage is the last response, totalUsage the sum',
    setup: (c) => c.toLlm().respond({ text: 'a', tokens: 100 }).toLlm(),
    event: (c) => response(c.requestId, { text: 'b', tokens: 300 }),
    expect: {
      phase: 'idle',
      effects: ['persist_message'],
      check: (r) => {
        expect(r.state.lastUsage).toEqual(usage(300));
        expect(r.state.totalUsage).toEqual(addUsage(usage(100), usage(300)));
      },
    },
  },
];

describe('docs/state-machine.md: responses', () => {
  it.each(cases(DOC_RESPONSES))('%s', (_l, row) => runRow(row));
});
