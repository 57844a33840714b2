/**
 * What the transport contract's parts share: waiting for a condition, unique names, the jobs and
 * events they send, and the context transportContract hands each part (its transport, and the
 * means to make more transports and consumers that are closed after the last case).
 */
import { create } from '@bufbuild/protobuf';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { ConversationEventSchema, LlmRequestJobSchema } from '@bedrock/contracts';
import type { ConversationEvent, LlmRequestJob } from '@bedrock/contracts';
import type { Consumer, Job, Transport } from '../src/index.ts';

/** Generous: conditions are awaited, never slept for, so this only bounds a failing test. */
const WAIT_MS = 15_000;

export async function waitFor(condition: () => boolean | Promise<boolean>, what: string, timeoutMs = WAIT_MS): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

let counter = 0;
export function unique(prefix: string): string {
  counter += 1;
  return `${prefix}-${counter}-${Math.random().toString(36).slice(2, 8)}`;
}

export function llmJob(requestId: string, extra: MessageInitShape<typeof LlmRequestJobSchema> = {}): LlmRequestJob {
  return create(LlmRequestJobSchema, {
    requestId,
    conversationId: 'conv-1',
    model: 'claude-test',
    toolNames: ['bash', 'patch'],
    attempt: 2,
    notifySequence: 12345678901234n,
    traceContext: { traceparent: '00-abc-def-01' },
    ...extra,
  });
}

export function durable(conversationId: string, sequence: bigint): ConversationEvent {
  return create(ConversationEventSchema, {
    conversationId,
    sequence,
    kind: { case: 'contextExhausted', value: { summary: `summary ${sequence}` } },
  });
}

export function delta(conversationId: string, sequence: bigint, text: string): ConversationEvent {
  return create(ConversationEventSchema, {
    conversationId,
    sequence,
    kind: { case: 'tokenDelta', value: { requestId: 'req-1', blockIndex: 0, text } },
  });
}

export function positions(events: ConversationEvent[]): string[] {
  return events.map((e) => `${e.sequence}-${e.deltaIndex}`);
}

/** What transportContract hands each part of the contract. */
export interface ContractContext {
  /** The transport made before the first case: call it in a hook or a case, not at registration. */
  transport(): Transport;
  /** Another transport (e.g. a second "replica"); closed after the last case. */
  make(): Promise<Transport>;
  /** Consumes `queue` on `transport`; the consumer is closed by closeConsumers, or after the last case. */
  consume(
    transport: Transport,
    queue: string,
    handler: (job: Job<LlmRequestJob>, signal: AbortSignal) => Promise<void>,
    options?: Parameters<Transport['queues']['consume']>[3],
  ): Consumer;
  /** Closes what a test left open (a failing test must not hang the others). */
  closeConsumers(): Promise<void>;
}
