/** Builders shared by the gateway's tests and benchmarks. */
import Anthropic from '@anthropic-ai/sdk';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { createModelRegistry } from '@bedrock/contracts/models';
import { ContentBlockSchema, LlmRequestJobSchema, LlmRequestPurpose, Role, type ContentBlock, type LlmRequestJob } from '@bedrock/contracts';
import { DEFAULT_IMAGE_LIMITS } from '../src/images.ts';
import type { RunOptions } from '../src/run-llm-request.ts';
import { livenessFetch } from '../src/liveness-fetch.ts';

export const text = (t: string): ContentBlock => create(ContentBlockSchema, { block: { case: 'text', value: { text: t } } });
export const image = (mediaType: string, data: Uint8Array): ContentBlock => create(ContentBlockSchema, { block: { case: 'image', value: { mediaType, data } } });
export const toolUse = (id: string, name: string, input: unknown): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'toolUse', value: { id, name, inputJson: JSON.stringify(input) } } });
export const toolResult = (toolUseId: string, content: string, isError = false): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'toolResult', value: { toolUseId, content, isError } } });
export const thinking = (t: string, signature: string): ContentBlock => create(ContentBlockSchema, { block: { case: 'thinking', value: { thinking: t, signature } } });
export const redactedThinking = (data: string): ContentBlock => create(ContentBlockSchema, { block: { case: 'redactedThinking', value: { data } } });
/** A provider-run tool's block, stored as the provider returned it. */
export const serverTool = (block: { type: string; [key: string]: unknown }): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'serverTool', value: { blockType: block.type, blockJson: JSON.stringify(block) } } });
export const citedText = (t: string, citations: unknown[]): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'text', value: { text: t, citationsJson: JSON.stringify(citations) } } });

let seq = 0;
export function makeJob(overrides: MessageInitShape<typeof LlmRequestJobSchema> & { user?: string } = {}): LlmRequestJob {
  const { user, ...rest } = overrides;
  seq++;
  return create(LlmRequestJobSchema, {
    requestId: `req-${process.pid}-${seq}`,
    conversationId: `conv-${process.pid}-${seq}`,
    model: 'claude-haiku-4-5',
    systemPrompt: 'You are a test.',
    toolNames: ['bash', 'think'],
    messages: [{ role: Role.USER, content: [text(user ?? 'hello')] }],
    maxTokens: 0,
    purpose: LlmRequestPurpose.TURN,
    attempt: 1,
    notifySequence: 5n,
    ...rest,
  });
}

export function runOptions(overrides: Partial<RunOptions> = {}): RunOptions {
  return {
    registry: createModelRegistry(),
    defaultModel: 'claude-haiku-4-5',
    defaultMaxTokens: 16_000,
    imageLimits: DEFAULT_IMAGE_LIMITS,
    requestTimeoutMs: 5_000,
    idleTimeoutMs: 5_000,
    ...overrides,
  };
}

export function sdkClient(baseURL: string): Anthropic {
  // As the gateway builds it: pings count as life (liveness-fetch.ts).
  return new Anthropic({ apiKey: 'sk-test', baseURL, maxRetries: 0, fetch: livenessFetch(), logLevel: 'off' });
}
