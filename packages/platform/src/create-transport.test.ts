import { afterEach, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import { loadConfig } from './config/config.ts';
import { transportSection } from './config/common.ts';
import { createTransport } from './create-transport.ts';
import type { Transport } from './interfaces.ts';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';

describe('createTransport', () => {
  const made: Transport[] = [];
  afterEach(async () => {
    await Promise.all(made.splice(0).map((t) => t.close()));
  });

  const event = (conversationId: string) =>
    create(ConversationEventSchema, { conversationId, sequence: 1n, kind: { case: 'contextExhausted', value: { summary: 's' } } });

  it('builds the in-process transport for memory', async () => {
    const t = createTransport(loadConfig(transportSection, { BEDROCK_TRANSPORT: 'memory' }), { warn: () => undefined });
    made.push(t);
    expect(await t.streams.appendDurable(event('c1'))).toBe(true);
    expect((await t.streams.read('c1', { sequence: 0n, deltaIndex: 0 })).length).toBe(1);
  });

  it('builds the Redis transport from its settings (the environment, then overrides), and nothing is logged while it works', async () => {
    const prefix = `create-transport-${process.pid}-${Date.now()}`;
    const warnings: string[] = [];
    const config = (env: Record<string, string>) => loadConfig(transportSection, env, { redis: { url: REDIS_URL } });
    const t = createTransport(config({ BEDROCK_REDIS_PREFIX: prefix }), { warn: (_fields, message) => warnings.push(message) });
    made.push(t);
    const id = `conv-${Date.now()}`;
    expect(await t.streams.appendDurable(event(id))).toBe(true);
    // The prefix came from the environment given.
    const again = createTransport(config({ BEDROCK_REDIS_PREFIX: prefix }), { warn: () => undefined });
    made.push(again);
    expect((await again.streams.read(id, { sequence: 0n, deltaIndex: 0 })).length).toBe(1);
    const other = createTransport(config({ BEDROCK_REDIS_PREFIX: `${prefix}-other` }), { warn: () => undefined });
    made.push(other);
    expect(await other.streams.read(id, { sequence: 0n, deltaIndex: 0 })).toEqual([]);
    expect(warnings).toEqual([]);
  });
});
