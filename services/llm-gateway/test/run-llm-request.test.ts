/** runLlmRequest against a local fake Messages server: responses and malformed streams; more in run-llm-request.*.test.ts. */
import { describe, it, expect } from '@jest/globals';
import { ErrorKind, StopReason, TokenDeltaKind } from '@bedrock/contracts';
import { STOP_REASONS } from '../src/stop-reason.ts';
import { makeJob, runOptions } from './helpers.ts';
import { error, response, run, runJob, useMessagesServer } from './run-llm-request-support.ts';

useMessagesServer();

describe('runLlmRequest: responses', () => {
  it('streams text deltas in order and completely, and returns text and tool calls', async () => {
    const long = 'The quick brown fox jumps over the lazy dog. '.repeat(20) + 'ünïcödé ✓ 🚀';
    const { outcome, deltas } = await run({
      kind: 'message',
      chunkChars: 5,
      content: [
        { type: 'text', text: long },
        { type: 'tool_use', id: 'toolu_a', name: 'bash', input: { command: 'ls -la' } },
        { type: 'tool_use', id: 'toolu_b', name: 'think', input: { thoughts: 'x' } },
      ],
    });
    const r = response(outcome);
    expect(deltas.length).toBeGreaterThan(100);
    expect(deltas.every(([i]) => i === 0)).toBe(true);
    expect(deltas.map(([, t]) => t).join('')).toBe(long);
    expect(r.stopReason).toBe(StopReason.TOOL_USE);
    expect(r.content.map((b) => b.block.case)).toEqual(['text', 'toolUse', 'toolUse']);
    expect(r.content[1]!.block.value).toMatchObject({ id: 'toolu_a', name: 'bash', inputJson: '{"command":"ls -la"}' });
    expect(r.model).toBe('claude-haiku-4-5');
  });

  it('reports usage with cache read and creation tokens: input from message_start, output from message_delta', async () => {
    const usage = { input_tokens: 1200, output_tokens: 345, cache_creation_input_tokens: 800, cache_read_input_tokens: 9000 };
    const r = response((await run({ kind: 'message', content: [{ type: 'text', text: 'ok' }], usage })).outcome);
    expect(r.usage).toMatchObject({ inputTokens: 1200n, outputTokens: 345n, cacheCreationInputTokens: 800n, cacheReadInputTokens: 9000n });
    // Newer API versions repeat cumulative counts in message_delta; those win.
    const r2 = response((await run({ kind: 'message', content: [{ type: 'text', text: 'ok' }], usage, usageInDelta: true })).outcome);
    expect(r2.usage).toMatchObject({ inputTokens: 1200n, outputTokens: 345n, cacheCreationInputTokens: 800n, cacheReadInputTokens: 9000n });
  });

  it('maps every documented stop reason', async () => {
    expect(Object.keys(STOP_REASONS).sort()).toEqual(
      ['end_turn', 'max_tokens', 'model_context_window_exceeded', 'pause_turn', 'refusal', 'stop_sequence', 'tool_use'].sort(),
    );
    for (const [api, mapped] of Object.entries(STOP_REASONS)) {
      const r = response((await run({ kind: 'message', content: [{ type: 'text', text: api }], stopReason: api })).outcome);
      expect(r.stopReason).toBe(mapped);
    }
  });

  it('infers the stop reason when message_stop arrives without one, or when the reason is new', async () => {
    const none = response(
      (await run({ kind: 'message', content: [{ type: 'tool_use', name: 'bash', input: { command: 'ls' } }], stopReason: null })).outcome,
    );
    expect(none.stopReason).toBe(StopReason.TOOL_USE);
    const warnings: string[] = [];
    const novel = response(
      (
        await run(
          { kind: 'message', content: [{ type: 'text', text: 'x' }], stopReason: 'brand_new_reason' },
          { onWarning: (m) => warnings.push(m) },
        )
      ).outcome,
    );
    expect(novel.stopReason).toBe(StopReason.END_TURN);
    expect(warnings).toContain('stop reason inferred from content');
  });
});

describe('runLlmRequest: malformed streams (spec/004)', () => {
  it('keeps block indexes aligned across unknown block types and leaves them out', async () => {
    const warnings: Array<[string, Record<string, unknown>]> = [];
    const { outcome, deltas } = await run(
      {
        kind: 'message',
        content: [
          { type: 'thinking', thinking: 'hmm, let me think' },
          {
            type: 'raw',
            start: { type: 'mcp_tool_use', id: 'mcptoolu_1', name: 'lookup', server_name: 'x', input: {} },
            deltas: [{ type: 'input_json_delta', partial_json: '{"q":"x"}' }],
          },
          { type: 'raw', start: { type: 'container_upload', file_id: 'f' } },
          { type: 'text', text: 'after unknown blocks' },
          { type: 'tool_use', id: 'toolu_z', name: 'bash', input: { command: 'pwd' } },
        ],
      },
      { onWarning: (m, f) => warnings.push([m, f]) },
    );
    const r = response(outcome);
    expect(r.content.map((b) => b.block.case)).toEqual(['thinking', 'text', 'toolUse']);
    expect(r.content[1]!.block.value).toEqual(expect.objectContaining({ text: 'after unknown blocks' }));
    expect(r.content[2]!.block.value).toEqual(expect.objectContaining({ id: 'toolu_z', inputJson: '{"command":"pwd"}' }));
    expect([...new Set(deltas.map(([i, , k]) => `${i}:${TokenDeltaKind[k]}`))]).toEqual(['0:THINKING', '3:TEXT']);
    expect(warnings.find(([m]) => m.includes('unknown types'))?.[1].types).toEqual(['mcp_tool_use', 'container_upload']);
  });

  it('drops a tool_use cut by max_tokens, names it, and keeps the text, the MAX_TOKENS stop reason and the max_tokens sent', async () => {
    const warnings: Array<[string, Record<string, unknown>]> = [];
    const { outcome, sent } = await runJob(
      makeJob({ maxTokens: 2_000 }),
      {
        kind: 'message',
        stopReason: 'max_tokens',
        content: [
          { type: 'text', text: 'Let me run it' },
          { type: 'tool_use', name: 'bash', input: { command: 'echo a very long command' }, partialJsonChars: 14 },
        ],
      },
      { onWarning: (m, f) => warnings.push([m, f]) },
    );
    const r = response(outcome);
    expect(r.stopReason).toBe(StopReason.MAX_TOKENS);
    expect(r.content.map((b) => b.block.case)).toEqual(['text']);
    expect(r.cutToolNames).toEqual(['bash']);
    expect([r.maxTokens, sent?.max_tokens]).toEqual([2_000, 2_000]);
    expect(warnings).toContainEqual([
      'dropped incomplete tool_use blocks',
      expect.objectContaining({ count: 1, tools: ['bash'], stop_reason: 'max_tokens', max_tokens: 2_000 }),
    ]);
  });

  it('reports a stream that ends without a stop reason as a retryable network error, never a partial response', async () => {
    const e = error(
      (await run({ kind: 'message', content: [{ type: 'text', text: 'partial text here' }], fault: { type: 'end', afterEvents: 3 } }))
        .outcome,
    );
    expect(e).toMatchObject({ kind: ErrorKind.NETWORK, retryable: true, httpStatus: 0 });
    expect(e.message).toMatch(/ended before the response was complete/);
    expect(e.providerRequestId).toMatch(/^req_/);
  });

  it('reports a connection cut mid-stream as a retryable network error', async () => {
    const e = error(
      (await run({ kind: 'message', content: [{ type: 'text', text: 'partial text here' }], fault: { type: 'cut', afterEvents: 3 } }))
        .outcome,
    );
    expect(e).toMatchObject({ kind: ErrorKind.NETWORK, retryable: true });
  });

  it('classifies mid-stream error events by their type', async () => {
    const overloaded = error(
      (
        await run({
          kind: 'message',
          content: [{ type: 'text', text: 'abc' }],
          fault: { type: 'error-event', afterEvents: 3, errorType: 'overloaded_error', message: 'Overloaded' },
        })
      ).outcome,
    );
    expect(overloaded).toMatchObject({ kind: ErrorKind.SERVER, retryable: true, httpStatus: 0, aborted: false });
    expect(overloaded.message).toMatch(/mid-stream overloaded_error.*Overloaded/);
    expect(overloaded.providerRequestId).toMatch(/^req_/);
    const limited = error(
      (
        await run({
          kind: 'message',
          content: [{ type: 'text', text: 'abc' }],
          fault: { type: 'error-event', afterEvents: 2, errorType: 'rate_limit_error', message: 'slow' },
        })
      ).outcome,
    );
    expect(limited).toMatchObject({ kind: ErrorKind.RATE_LIMIT, retryable: true });
    const invalid = error(
      (
        await run({
          kind: 'message',
          content: [{ type: 'text', text: 'abc' }],
          fault: { type: 'error-event', afterEvents: 2, errorType: 'invalid_request_error', message: 'bad' },
        })
      ).outcome,
    );
    expect(invalid).toMatchObject({ kind: ErrorKind.INVALID_REQUEST, retryable: false });
  });

  it('reports a malformed event as a retryable server error', async () => {
    const e = error(
      (await run({ kind: 'message', content: [{ type: 'text', text: 'abc' }], fault: { type: 'malformed', afterEvents: 3 } })).outcome,
    );
    expect(e).toMatchObject({ kind: ErrorKind.SERVER, retryable: true });
    expect(e.message).toMatch(/malformed stream event/);
  });

  it('a response that only pings for longer than the idle timeout is alive, and completes', async () => {
    const { outcome } = await run(
      {
        kind: 'message',
        content: [{ type: 'text', text: 'thought long' }],
        fault: { type: 'pings', afterEvents: 2, forMs: 700, everyMs: 50 },
      },
      {},
      runOptions({ idleTimeoutMs: 200 }),
    );
    expect(outcome.case).toBe('llmResponse');
  });

  it('abandons a stalled stream after the idle timeout', async () => {
    const started = Date.now();
    const e = error(
      (
        await run(
          { kind: 'message', content: [{ type: 'text', text: 'abc' }], fault: { type: 'stall', afterEvents: 2 } },
          {},
          runOptions({ idleTimeoutMs: 150 }),
        )
      ).outcome,
    );
    expect(e).toMatchObject({ kind: ErrorKind.NETWORK, retryable: true });
    expect(e.message).toMatch(/sent nothing for 150 ms/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });
});
