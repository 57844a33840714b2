import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ToolExecJobSchema } from '@bedrock/contracts';
import { createMemoryTransport } from '../memory/memory-transport.ts';
import { createMetrics } from './metrics.ts';
import { startQueueDepthSampler } from './queue-depth-sampler.ts';

describe('startQueueDepthSampler', () => {
  it('sets bedrock_queue_depth for each queue and state, and follows changes', async () => {
    const transport = createMemoryTransport();
    const metrics = createMetrics('test');
    const producer = transport.queues.producer('q1', ToolExecJobSchema);
    await producer.add('a', create(ToolExecJobSchema, {}));
    await producer.add('b', create(ToolExecJobSchema, {}));
    await producer.add('c', create(ToolExecJobSchema, {}), { delayMs: 60_000 });
    const sampler = startQueueDepthSampler({ queues: transport.queues, names: ['q1', 'q2'], metrics, intervalMs: 60_000 });
    await sampler.sample();
    const value = async (queue: string, state: string) =>
      (await metrics.queueDepth.get()).values.find((v) => v.labels.queue === queue && v.labels.state === state)?.value;
    expect([await value('q1', 'waiting'), await value('q1', 'delayed'), await value('q1', 'active'), await value('q2', 'waiting')]).toEqual(
      [2, 1, 0, 0],
    );
    await producer.remove('a');
    await sampler.sample();
    expect(await value('q1', 'waiting')).toBe(1);
    expect(await metrics.registry.metrics()).toContain('bedrock_queue_depth{queue="q1",state="waiting",service="test"} 1');
    sampler.stop();
    await transport.close();
  });

  it('reports a failed sample and keeps going', async () => {
    const metrics = createMetrics('test');
    const errors: unknown[] = [];
    let calls = 0;
    const queues = {
      depth: async () => {
        calls++;
        throw new Error('redis away');
      },
    } as unknown as Parameters<typeof startQueueDepthSampler>[0]['queues'];
    const sampler = startQueueDepthSampler({ queues, names: ['q'], metrics, onError: (e) => errors.push(e) });
    await sampler.sample();
    await sampler.sample();
    expect(calls).toBeGreaterThanOrEqual(2);
    expect(errors.length).toBe(calls);
    sampler.stop();
  });
});
