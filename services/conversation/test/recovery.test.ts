/**
 * Recovery (REQ-BED-007; docs/design.md, "Resolution 3: one replica's restart does not disturb
 * the others; lost work is found"): lost work comes back to rest with synthetic results, a
 * conversation waiting for approval is left alone, and real results are never replaced.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create, toJsonString } from '@bufbuild/protobuf';
import {
  ConversationEventJobSchema,
  MessageType,
  QUEUE_CONVERSATION_EVENTS,
  StateKind,
  StopReason,
  ToolCompleteEventSchema,
  llmResultEventId,
  llmRunKey,
  toolResultEventId,
  toolRunKey,
} from '@bedrock/contracts';
import { buildLlmHistory, checkToolChain, LOST_RESULT } from '../src/core/index.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  // The test's workers take every job and never answer: each conversation's work is "lost".
  h = await startHarness({
    label: 'recovery',
    config: { recovery: { interval: 100, staleAfter: 300 } },
  });
});
afterAll(async () => {
  await h?.close();
});

const usage = { inputTokens: 10n, outputTokens: 5n };

async function conversationAt(tools: { id: string; name: string; input: object }[]) {
  const conv = (await h.client().createConversation({ cwd: '/tmp' })).conversation!;
  await h.client().sendMessage({ conversationId: conv.id, text: 'go' });
  const job = await h.waitFor('llm job', () => h.llmJobs.find((j) => j.conversationId === conv.id));
  await h.send(conv.id, `r/${job.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: job.requestId,
      stopReason: StopReason.TOOL_USE,
      usage,
      content: tools.map((t) => ({
        block: { case: 'toolUse' as const, value: { id: t.id, name: t.name, inputJson: JSON.stringify(t.input) } },
      })),
    },
  });
  return conv.id;
}

async function kind(id: string) {
  return (await h.client().getConversation({ conversationId: id })).conversation!.state!.kind;
}

describe('recovery sweeper', () => {
  it('returns a conversation whose tool job was taken and never answered to idle, chain valid', async () => {
    const id = await conversationAt([
      { id: 'lost1', name: 'bash', input: { command: 'sleep 100' } },
      { id: 'lost2', name: 'bash', input: { command: 'true' } },
    ]);
    await h.waitFor('tool job taken', () => h.toolJobs.find((j) => j.toolUseId === 'lost1'));
    await h.waitFor('idle after recovery', async () => (await kind(id)) === StateKind.IDLE, 15_000);
    const { messages } = await h.client().getConversation({ conversationId: id });
    const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
    expect(results.map((r) => [r.toolUseId, r.content, r.cancelled])).toEqual([
      ['lost1', LOST_RESULT, true],
      ['lost2', LOST_RESULT, true],
    ]);
    // The persisted history is still a valid chain for the next request.
    const stored = await h.pool.query('SELECT message_type AS type, content FROM messages WHERE conversation_id = $1 ORDER BY sequence', [
      id,
    ]);
    expect(checkToolChain(buildLlmHistory(stored.rows))).toEqual([]);
    // And the user can go on.
    await h.client().sendMessage({ conversationId: id, text: 'again' });
    expect(await kind(id)).toBe(StateKind.LLM_REQUESTING);
  });

  it('returns a conversation whose LLM request was taken and never answered to idle, keeping the user message', async () => {
    const conv = (await h.client().createConversation({ cwd: '/tmp' })).conversation!;
    await h.client().sendMessage({ conversationId: conv.id, text: 'are you there?' });
    await h.waitFor('llm job taken', () => h.llmJobs.find((j) => j.conversationId === conv.id));
    await h.waitFor('idle after recovery', async () => (await kind(conv.id)) === StateKind.IDLE, 15_000);
    const { messages } = await h.client().getConversation({ conversationId: conv.id });
    expect(messages.map((m) => m.type)).toEqual([MessageType.USER]);
  });

  it('waits for a finished tool whose result event is still queued, and applies the real result', async () => {
    const id = await conversationAt([{ id: 'queued1', name: 'bash', input: { command: 'echo real' } }]);
    const job = await h.waitFor('tool job taken', () => h.toolJobs.find((j) => j.toolUseId === 'queued1'));
    // The runner finished and sent its result, but the result has not been applied yet (here:
    // delayed; after a crash: held by a dead replica until the queue hands it on).
    const eventId = toolResultEventId(id, 'queued1');
    await h.transport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema).add(
      eventId,
      create(ConversationEventJobSchema, {
        eventId,
        conversationId: id,
        event: { case: 'toolComplete', value: { toolUseId: job.toolUseId, content: 'real\n' } },
      }),
      { delayMs: 2000 },
    );
    // Stale (300 ms) and confirmed (300 ms) many times over while the result waits.
    await new Promise((r) => setTimeout(r, 1200));
    expect(await h.service.sweeper.sweep()).not.toContain(id);
    expect(await kind(id)).toBe(StateKind.TOOL_EXECUTING);
    await h.waitFor('the real result', async () => (await kind(id)) === StateKind.LLM_REQUESTING, 10_000);
    const { messages } = await h.client().getConversation({ conversationId: id });
    const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
    expect(results.map((r) => [r.toolUseId, r.content, r.cancelled])).toEqual([['queued1', 'real\n', false]]);
  });

  it('waits for a tool whose runner still beats in the run ledger, then takes the result it sends', async () => {
    const id = await conversationAt([{ id: 'alive1', name: 'bash', input: { command: 'sleep 5' } }]);
    const job = await h.waitFor('tool job taken', () => h.toolJobs.find((j) => j.toolUseId === 'alive1'));
    // The job itself is gone (as after a Redis restart), but the runner still runs the tool.
    const key = toolRunKey(id, 'alive1');
    expect(await h.transport.runs.claim(key, 'runner-x#1')).toBeNull();
    const beat = setInterval(() => void h.transport.runs.heartbeat(key, 'runner-x#1'), h.transport.runs.heartbeatMs);
    try {
      await new Promise((r) => setTimeout(r, 1200));
      expect(await kind(id)).toBe(StateKind.TOOL_EXECUTING);
    } finally {
      clearInterval(beat);
    }
    await h.complete(job, { content: 'slept' }, toolResultEventId(id, 'alive1'));
    await h.waitFor('the real result', async () => (await kind(id)) === StateKind.LLM_REQUESTING);
  });

  it('applies the result a runner recorded in the run ledger when its result event was lost', async () => {
    const id = await conversationAt([{ id: 'recorded1', name: 'bash', input: { command: 'echo kept' } }]);
    await h.waitFor('tool job taken', () => h.toolJobs.find((j) => j.toolUseId === 'recorded1'));
    const key = toolRunKey(id, 'recorded1');
    await h.transport.runs.claim(key, 'runner-y#1');
    await h.transport.runs.finish(
      key,
      'runner-y#1',
      toJsonString(ToolCompleteEventSchema, create(ToolCompleteEventSchema, { toolUseId: 'recorded1', content: 'kept\n', exitCode: 0 })),
    );
    await h.waitFor('the recorded result', async () => (await kind(id)) === StateKind.LLM_REQUESTING, 10_000);
    const { messages } = await h.client().getConversation({ conversationId: id });
    const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
    expect(results.map((r) => [r.toolUseId, r.content, r.isError])).toEqual([['recorded1', 'kept\n', false]]);
  });

  it('waits for an LLM request whose gateway still beats, and for its queued answer', async () => {
    const conv = (await h.client().createConversation({ cwd: '/tmp' })).conversation!;
    await h.client().sendMessage({ conversationId: conv.id, text: 'slow model' });
    const job = await h.waitFor('llm job taken', () => h.llmJobs.find((j) => j.conversationId === conv.id));
    const beat = setInterval(() => void h.transport.runs.markAlive(llmRunKey(job.requestId), 'gw#1'), h.transport.runs.heartbeatMs);
    try {
      await h.transport.runs.markAlive(llmRunKey(job.requestId), 'gw#1');
      await new Promise((r) => setTimeout(r, 1200));
      expect(await kind(conv.id)).toBe(StateKind.LLM_REQUESTING);
      // The answer is sent (here delayed) as the stream ends.
      await h.transport.queues.producer(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema).add(
        llmResultEventId(job.requestId),
        create(ConversationEventJobSchema, {
          eventId: llmResultEventId(job.requestId),
          conversationId: conv.id,
          event: {
            case: 'llmResponse',
            value: {
              requestId: job.requestId,
              stopReason: StopReason.END_TURN,
              usage,
              content: [{ block: { case: 'text', value: { text: 'finally' } } }],
            },
          },
        }),
        { delayMs: 1500 },
      );
    } finally {
      clearInterval(beat);
    }
    await h.waitFor('the real answer', async () => (await kind(conv.id)) === StateKind.IDLE, 10_000);
    const { messages } = await h.client().getConversation({ conversationId: conv.id });
    expect(messages.map((m) => m.type)).toEqual([MessageType.USER, MessageType.AGENT]);
  });

  it('leaves a conversation awaiting mode approval alone, however long it waits', async () => {
    const id = await conversationAt([{ id: 'up1', name: 'request_mode_upgrade', input: { reason: 'write a file' } }]);
    await h.waitFor('awaiting approval', async () => (await kind(id)) === StateKind.AWAITING_MODE_APPROVAL);
    // Several sweeps pass (interval 100 ms, stale after 300 ms).
    const before = await h.service.sweeper.sweep();
    await new Promise((r) => setTimeout(r, 800));
    expect(before).not.toContain(id);
    expect(await h.service.sweeper.sweep()).not.toContain(id);
    expect(await kind(id)).toBe(StateKind.AWAITING_MODE_APPROVAL);
  });
});
