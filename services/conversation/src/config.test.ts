import { readFileSync } from 'node:fs';
import { describe, expect, it } from '@jest/globals';
import { describeEnv, EnvError } from '@bedrock/platform/server';
import { conversationEnv, readConversationConfig } from './config.ts';

describe('conversation config', () => {
  it('documents every setting in docs/conversation.md', () => {
    const doc = readFileSync(new URL('../../../docs/conversation.md', import.meta.url), 'utf8');
    for (const row of describeEnv(conversationEnv)) expect(doc).toContain(`\`${row.name}\``);
  });

  it('reads the thinking default and the server tool allow-list (default: high, none)', () => {
    expect(readConversationConfig({})).toMatchObject({ defaultThinking: 'high', serverTools: undefined });
    const config = readConversationConfig({ BEDROCK_DEFAULT_THINKING: 'off', BEDROCK_SERVER_TOOLS: ' web_fetch , web_search,web_fetch ' });
    expect([config.defaultThinking, config.serverTools]).toEqual(['off', ['web_search', 'web_fetch']]);
    expect(() => readConversationConfig({ BEDROCK_DEFAULT_THINKING: 'huge' })).toThrow(
      /BEDROCK_DEFAULT_THINKING="huge" is invalid: expected one of off, low, medium, high, max/,
    );
    expect(() => readConversationConfig({ BEDROCK_SERVER_TOOLS: 'web_search,code_execution' })).toThrow(
      /BEDROCK_SERVER_TOOLS="web_search,code_execution" is invalid: expected a comma-separated list of web_search, web_fetch \(unknown: code_execution\)/,
    );
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
