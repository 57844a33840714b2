/**
 * The user's messages (sent at once, queued, steering or interrupting), the pending list
 * they wait in, and a continuation the user asks for. Rows: docs/state-machine.md.
 */
import { MAX_PENDING_IMAGE_CHARS, MAX_PENDING_MESSAGES, rejection } from './constants.ts';
import { ZERO_USAGE } from './usage.ts';
import type { ContentBlock, DeliveryMode, ImageInput, PendingMessage, ToolOutputSeen } from './types.ts';
import type { Draft, Outcome } from './draft.ts';
import { requestContinuation } from './turn.ts';
import { onUserCancel } from './cancel.ts';

/** `toolOutput`: an interrupt's, what the running tool had printed (onUserCancel). */
export function onUserMessage(
  d: Draft,
  text: string,
  images: readonly ImageInput[],
  delivery: DeliveryMode,
  toolOutput?: ToolOutputSeen,
): Outcome {
  if (d.ctx.isSubAgent) return rejection('sub_agent_driven_by_parent');
  if (text.trim() === '' && images.length === 0) return rejection('empty_message');
  switch (d.phase.kind) {
    case 'idle':
    case 'error':
      // At rest every delivery mode sends at once.
      persistUser(d, text, images);
      d.phase = { kind: 'awaiting_llm' };
      return;
    case 'cancelling':
      // A cancel is already under way: interrupt waits for it like the others.
      if (delivery === 'reject') return rejection('cancellation_in_progress');
      return enqueue(d, delivery, text, images);
    case 'awaiting_continuation':
      // The conversation ends in context_exhausted: a waiting message could never be delivered.
      return rejection('agent_busy');
    default: {
      if (delivery === 'reject') return rejection('agent_busy');
      const refused = enqueue(d, delivery, text, images);
      if (refused) return refused;
      // Cancel; when that leaves the conversation idle at once, run() delivers the message.
      if (delivery === 'interrupt') return onUserCancel(d, toolOutput);
      return;
    }
  }
}

function persistUser(d: Draft, text: string, images: readonly ImageInput[]): void {
  const content: ContentBlock[] = [];
  if (text.trim() !== '') content.push({ type: 'text', text });
  for (const image of images) content.push({ type: 'image', mediaType: image.mediaType, data: image.data });
  d.persist('user', content);
}

/** The id of the message a transition puts in the pending list. */
export function pendingMessageId(conversationId: string, seq: number): string {
  return `${conversationId}/q/${seq}`;
}

function enqueue(d: Draft, delivery: PendingMessage['delivery'], text: string, images: readonly ImageInput[]): Outcome {
  if (d.pending.length >= MAX_PENDING_MESSAGES) return rejection('queue_full');
  let chars = 0;
  for (const m of d.pending) for (const image of m.images) chars += image.data.length;
  for (const image of images) chars += image.data.length;
  if (images.length > 0 && chars > MAX_PENDING_IMAGE_CHARS) return rejection('queue_full');
  d.pending = [...d.pending, { id: pendingMessageId(d.ctx.conversationId, d.seq), delivery, text, images }];
  return;
}

export function onCancelQueued(d: Draft, queuedId: string): Outcome {
  if (d.ctx.isSubAgent) return rejection('sub_agent_driven_by_parent');
  const rest = d.pending.filter((m) => m.id !== queuedId);
  if (rest.length === d.pending.length) return rejection('not_queued');
  d.pending = rest;
  return;
}

/**
 * The turn came to rest (idle or error) with messages waiting: the urgent ones (steer,
 * interrupt) go out together as the next user turn, in the order they arrived; else the first
 * queued message. What stays waits for the end of that turn.
 */
export function deliverAtRest(d: Draft): void {
  if (!deliverUrgent(d)) {
    const [first, ...rest] = d.pending;
    persistUser(d, first!.text, first!.images);
    d.pending = rest;
  }
  d.phase = { kind: 'awaiting_llm' };
}

/** Persists every steer and interrupt message, in order; false when there was none. */
export function deliverUrgent(d: Draft): boolean {
  let delivered = false;
  const kept: PendingMessage[] = [];
  for (const m of d.pending) {
    if (m.delivery === 'queue') {
      kept.push(m);
    } else {
      persistUser(d, m.text, m.images);
      delivered = true;
    }
  }
  if (delivered) d.pending = kept;
  return delivered;
}

export function onTriggerContinuation(d: Draft): Outcome {
  if (d.ctx.isSubAgent) return rejection('continuation_unavailable');
  if (d.phase.kind !== 'idle' && d.phase.kind !== 'error') return rejection('continuation_unavailable');
  requestContinuation(d, [], d.lastUsage ?? ZERO_USAGE);
  return;
}
