/** What only the in-process transport has: retention, trimming and expiry set through options. */
import { describe, it, expect } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, LlmRequestJobSchema } from '@bedrock/contracts';
import { STREAM_START, createMemoryTransport } from '../src/index.ts';
import { waitFor } from './transport-contract-support.ts';

function durable(conversationId: string, sequence: bigint) {
  return create(ConversationEventSchema, {
    conversationId,
    sequence,
    kind: { case: 'contextExhausted', value: { summary: `s${sequence}` } },
  });
}

describe('in-process transport specifics', () => {
  it('forgets a completed job id after the retention period, and not before', async () => {
    const t = createMemoryTransport({ queues: { completedRetentionMs: 1000 } });
    try {
      const producer = t.queues.producer('retention', LlmRequestJobSchema);
      let runs = 0;
      const consumer = t.queues.consume('retention', LlmRequestJobSchema, async () => {
        runs += 1;
      });
      expect(await producer.add('r:1', create(LlmRequestJobSchema, { requestId: 'a' }))).toBe(true);
      await waitFor(async () => (await t.queues.jobStatus('retention', 'r:1')).state === 'completed', 'completion');
      expect(await producer.add('r:1', create(LlmRequestJobSchema, { requestId: 'a' }))).toBe(false);
      await waitFor(async () => (await t.queues.jobStatus('retention', 'r:1')).state === 'unknown', 'the id to be forgotten');
      expect(await producer.add('r:1', create(LlmRequestJobSchema, { requestId: 'a' }))).toBe(true);
      await waitFor(() => runs === 2, 'the second run');
      await consumer.close();
    } finally {
      await t.close();
    }
  });

  it('trims a stream to maxLen but still refuses positions it passed', async () => {
    const t = createMemoryTransport({ streams: { maxLen: 5 } });
    try {
      for (let seq = 1n; seq <= 12n; seq++) expect(await t.streams.appendDurable(durable('c', seq))).toBe(true);
      const events = await t.streams.read('c', STREAM_START);
      expect(events.map((e) => e.sequence)).toEqual([8n, 9n, 10n, 11n, 12n]);
      expect(await t.streams.appendDurable(durable('c', 2n))).toBe(false);
      expect(await t.streams.last('c')).toEqual({ sequence: 12n, deltaIndex: 0 });
    } finally {
      await t.close();
    }
  });

  it('forgets a stream ttlMs after its last append', async () => {
    const t = createMemoryTransport({ streams: { ttlMs: 100 } });
    try {
      expect(await t.streams.appendDurable(durable('c', 1n))).toBe(true);
      expect(await t.streams.last('c')).toEqual({ sequence: 1n, deltaIndex: 0 });
      await waitFor(async () => (await t.streams.read('c', STREAM_START)).length === 0, 'expiry');
      expect(await t.streams.last('c')).toEqual(STREAM_START);
    } finally {
      await t.close();
    }
  });

  it('refuses work once closed', async () => {
    const t = createMemoryTransport();
    const producer = t.queues.producer('closed', LlmRequestJobSchema);
    await t.close();
    await expect(producer.add('x', create(LlmRequestJobSchema, {}))).rejects.toThrow(/closed/);
    await expect(t.streams.appendDurable(durable('c', 1n))).rejects.toThrow(/closed/);
    expect(await t.streams.read('c', STREAM_START, { blockMs: 10_000 })).toEqual([]);
  });
});
