import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { describeEnv, EnvError } from '@bedrock/platform/server';
import { conversationEnv, readConversationConfig } from './config.ts';

describe('conversation config', () => {
  it('documents every setting in docs/conversation.md', () => {
    const doc = readFileSync(new URL('../../../docs/conversation.md', import.meta.url), 'utf8');
    for (const row of describeEnv(conversationEnv)) expect(doc).toContain(`\`${row.name}\``);
  });

  it('has working defaults and rejects bad values with one error naming each', () => {
    const config = readConversationConfig({});
    expect(config.grpcPort).toBe(50051);
    expect(config.transport).toBe('redis');
    expect(() => readConversationConfig({ BEDROCK_GRPC_PORT: 'x', BEDROCK_TRANSPORT: 'kafka' })).toThrow(EnvError);
    try {
      readConversationConfig({ BEDROCK_GRPC_PORT: 'x', BEDROCK_TRANSPORT: 'kafka' });
    } catch (err) {
      expect((err as EnvError).problems).toHaveLength(2);
    }
  });
});
