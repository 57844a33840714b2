/**
 * A user action (SendMessage, Cancel, a mode answer, …) applied through the state machine:
 * ownership, the user's limits, the turn's trace, a request id's stored outcome and replay.
 */
import type { HandlerContext } from '@connectrpc/connect';
import { toBinary, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import { isResting, type Message } from '@bedrock/contracts';
import { inSpan } from '@bedrock/platform/server';
import type { ConversationEvent, ConversationState } from '../../core/index.ts';
import type { ApplyResult } from '../../apply/applier.ts';
import type { PriorOutcome, StoredOutcome } from '../../store/request-outcomes.ts';
import { invokeAgentAttributes, turnTraceContext } from '../turn-trace.ts';
import { actorOf, notFound, rejectedError, requestKeyOf, type Settled } from '../request-checks.ts';
import type { ConversationApi } from './shared.ts';

export interface UserAction<Q extends DescMessage, S extends DescMessage> {
  readonly method: string;
  readonly conversationId: string;
  readonly requestSchema: Q;
  readonly request: MessageShape<Q> & { requestId: string };
  readonly responseSchema: S;
  readonly eventType: ConversationEvent['type'];
  /**
   * The event to apply, given the state read before it; validation that throws goes here (skipped
   * when a retry is answered from its first outcome).
   */
  readonly event: (current: ConversationState) => ConversationEvent | Promise<ConversationEvent>;
  /** Expensive validation (decoding images), run only once the call is admitted by the user's limits. */
  readonly admitted?: () => Promise<void>;
  readonly respond: (result: Settled) => MessageShape<S>;
}

/** What is stored for a request id: the refusal, or the response (SendMessage's without the message, kept by id). */
function outcomeOf<S extends DescMessage>(
  result: ApplyResult,
  schema: S,
  respond: (result: Settled) => MessageShape<S>,
): StoredOutcome | null {
  switch (result.kind) {
    case 'not_found':
      return null;
    case 'rejected': {
      const err = rejectedError(result);
      return { error: { code: err.code, message: err.rawMessage, rejection: result.rejection.code } };
    }
    case 'applied':
    case 'noop': {
      const response = respond(result) as MessageShape<S> & { message?: Message };
      if (!response.message) return { response: toBinary(schema, response) };
      return { response: toBinary(schema, { ...response, message: undefined }), messageId: response.message.id };
    }
  }
}

/**
 * Applies a user action; a rejection becomes FAILED_PRECONDITION with the state machine's
 * words. With a request id, the outcome is stored in the same transaction and a retry is
 * answered from it (request-outcomes.ts).
 */
export async function act<Q extends DescMessage, S extends DescMessage>(
  api: ConversationApi,
  ctx: HandlerContext,
  action: UserAction<Q, S>,
): Promise<MessageShape<S>> {
  const { options, store, applier, now } = api;
  const id = action.conversationId;
  const { ownerId, state: current } = await api.owned(ctx, id);
  const key = requestKeyOf(ownerId, id, action.method, action.requestSchema, action.request);
  const replayed = async (prior: PriorOutcome) => {
    options.onApplied?.('none', action.eventType, 'replayed');
    return api.replay(prior, key!, action.responseSchema);
  };
  // A retry of a request already answered skips validation (images are decoded only once).
  const earlier = key ? await store.findRequest(key) : null;
  if (earlier) return replayed(earlier);
  const event = await action.event(current);
  const actor = actorOf(ctx);
  const apply = async () => {
    // One user turn is one trace: the active span's, the caller's traceparent (web-bff forwards it) or a new one.
    const trace = turnTraceContext(ctx.requestHeader);
    return key
      ? await applier.applyRequest(id, event, trace, { key, outcome: (r) => outcomeOf(r, action.responseSchema, action.respond) }, actor)
      : await applier.apply(id, event, trace, actor);
  };
  // A user message starts the agent: the turn's `invoke_agent` span (GenAI conventions) parents its jobs.
  // It, and a continuation (a summary request), meets the user's limits first; to a conversation at
  // rest it starts a turn (one more busy). Expensive validation runs only once admitted.
  const limits = options.limits;
  const admittedThenApply = action.admitted ? async () => (await action.admitted!(), apply()) : apply;
  const startsWork = event.type === 'user_message' || event.type === 'user_trigger_continuation';
  const send =
    limits && startsWork ? () => limits.admitMessage(ownerId, isResting(current.phase.kind), now(), admittedThenApply) : admittedThenApply;
  const result =
    event.type === 'user_message' ? await inSpan('invoke_agent', { attributes: invokeAgentAttributes(id) }, send) : await send();
  // A duplicate that was in flight at the same time (another replica): the first one's outcome.
  if (result.kind === 'replayed') return replayed(result.prior);
  options.onApplied?.(result.kind === 'not_found' ? 'none' : result.from, event.type, result.kind);
  switch (result.kind) {
    case 'not_found':
      throw notFound(id);
    case 'rejected':
      throw rejectedError(result);
    case 'applied':
      // The applier published the effects already: a cancel reaches the worker before the answer.
      return action.respond(result);
    case 'noop':
      return action.respond(result);
  }
}
