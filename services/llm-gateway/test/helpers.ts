/** Builders shared by the gateway's tests and benchmarks. */
import Anthropic from '@anthropic-ai/sdk';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { createModelRegistry } from '@bedrock/contracts/models';
import {
  ContentBlockSchema,
  LlmMessageSchema,
  LlmRequestJobSchema,
  LlmRequestPurpose,
  Role,
  type ContentBlock,
  type LlmMessage,
} from '@bedrock/contracts';
import { DEFAULT_IMAGE_LIMITS } from '../src/images.ts';
import type { LlmRequest, RunOptions } from '../src/run-llm-request.ts';
import { memoryHistorySource, type HistorySource } from '../src/history-source.ts';
import { livenessFetch } from '../src/liveness-fetch.ts';

export const text = (t: string): ContentBlock => create(ContentBlockSchema, { block: { case: 'text', value: { text: t } } });
export const image = (mediaType: string, data: Uint8Array): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'image', value: { mediaType, data } } });
export const toolUse = (id: string, name: string, input: unknown): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'toolUse', value: { id, name, inputJson: JSON.stringify(input) } } });
export const toolResult = (toolUseId: string, content: string, isError = false): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'toolResult', value: { toolUseId, content, isError } } });
export const thinking = (t: string, signature: string): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'thinking', value: { thinking: t, signature } } });
export const redactedThinking = (data: string): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'redactedThinking', value: { data } } });
/** A provider-run tool's block, stored as the provider returned it. */
export const serverTool = (block: { type: string; [key: string]: unknown }): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'serverTool', value: { blockType: block.type, blockJson: JSON.stringify(block) } } });
export const citedText = (t: string, citations: unknown[]): ContentBlock =>
  create(ContentBlockSchema, { block: { case: 'text', value: { text: t, citationsJson: JSON.stringify(citations) } } });

let seq = 0;

/** The histories of the jobs made here, by conversation id: what the conversation service would answer. */
const histories = new Map<string, readonly LlmMessage[]>();

/** A history source answering every job made by {@link makeJob} with its messages (as the conversation service would). */
export const testHistory: HistorySource = memoryHistorySource((claim) => histories.get(claim.conversationId));

export type JobInit = MessageInitShape<typeof LlmRequestJobSchema> & {
  user?: string;
  messages?: MessageInitShape<typeof LlmMessageSchema>[];
};

/**
 * A job with its history at hand (an LlmRequest): the claim-check job as queued, plus the
 * messages the conversation service answers for it, registered with {@link testHistory}.
 */
export function makeJob(overrides: JobInit = {}): LlmRequest {
  const { user, messages, ...rest } = overrides;
  seq++;
  const job = create(LlmRequestJobSchema, {
    requestId: `req-${process.pid}-${seq}`,
    conversationId: `conv-${process.pid}-${seq}`,
    model: 'claude-haiku-4-5',
    systemPrompt: 'You are a test.',
    toolNames: ['bash', 'think'],
    maxTokens: 0,
    purpose: LlmRequestPurpose.TURN,
    attempt: 1,
    notifySequence: 5n,
    ...rest,
  });
  const turns = (messages ?? [{ role: Role.USER, content: [text(user ?? 'hello')] }]).map((m) => create(LlmMessageSchema, m));
  job.historyThrough ||= BigInt(turns.length);
  histories.set(job.conversationId, turns);
  return { ...job, messages: turns };
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
