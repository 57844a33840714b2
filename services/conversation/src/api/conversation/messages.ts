/**
 * ConversationService's messages and turns: SendMessage (sent, queued, steering or
 * interrupting), CancelQueuedMessage, Cancel and TriggerContinuation; each a user action.
 */
import { Code, ConnectError, type HandlerContext } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import {
  CancelQueuedMessageRequestSchema,
  CancelQueuedMessageResponseSchema,
  CancelRequestSchema,
  CancelResponseSchema,
  SendMessageRequestSchema,
  SendMessageResponseSchema,
  TriggerContinuationRequestSchema,
  TriggerContinuationResponseSchema,
  type SendMessageRequest,
} from '@bedrock/contracts';
import { pendingMessageId } from '../../core/index.ts';
import { deliveryFromProto, messageToProto, stateToProto } from '../../mapping/proto.ts';
import { LIMITS } from '../input-limits.ts';
import { validateImages } from '../request-checks.ts';
import type { ConversationApi, ConversationHandlers } from './shared.ts';
import { runningToolOutput } from './tool-output.ts';
import { act } from './user-actions.ts';

/** SendMessage: the text and images checked (images decoded once admitted), then the message applied. */
function sendMessage(api: ConversationApi, req: SendMessageRequest, ctx: HandlerContext) {
  const { options, policy } = api;
  let decodeImages: (() => Promise<void>) | undefined;
  return act(api, ctx, {
    method: 'SendMessage',
    conversationId: req.conversationId,
    requestSchema: SendMessageRequestSchema,
    request: req,
    responseSchema: SendMessageResponseSchema,
    eventType: 'user_message',
    async event(current) {
      if (req.text.length > LIMITS.maxTextChars) {
        throw new ConnectError(`message text is ${req.text.length} characters; the limit is ${LIMITS.maxTextChars}`, Code.InvalidArgument);
      }
      const delivery = deliveryFromProto(req.delivery);
      if (delivery === null) {
        throw new ConnectError(
          `delivery: ${req.delivery} is not a delivery mode; use REJECT, QUEUE, STEER or INTERRUPT.`,
          Code.InvalidArgument,
        );
      }
      decodeImages = validateImages(req.images, options.imagePixelsPerMessage ?? LIMITS.maxImagePixels);
      // An interrupt cancels the turn first: what the running tool printed stays, as with Cancel.
      const toolOutput =
        delivery === 'interrupt' ? await runningToolOutput(options.streams, req.conversationId, current, options.logger) : undefined;
      return {
        type: 'user_message',
        text: req.text,
        images: req.images.map((image) => ({ mediaType: image.mediaType, data: Buffer.from(image.data).toString('base64') })),
        ...(delivery === 'reject' ? {} : { delivery }),
        ...(toolOutput ? { toolOutput } : {}),
      };
    },
    respond(result) {
      const state = result.record.state;
      // The message waits when this transition put it in the pending list.
      const queuedId = pendingMessageId(result.record.id, state.seq);
      const queued = result.kind === 'applied' && (state.pending ?? []).some((m) => m.id === queuedId);
      // Sent now: the last user message this transition persisted (waiting steers it delivered come before it).
      const message = result.kind === 'applied' && !queued ? result.persisted.filter((m) => m.type === 'user').at(-1) : undefined;
      return create(SendMessageResponseSchema, {
        ...(message ? { message: messageToProto(message) } : {}),
        state: stateToProto(state, policy),
        ...(queued ? { queuedId } : {}),
      });
    },
    admitted: () => decodeImages?.() ?? Promise.resolve(),
  });
}

export function messageHandlers(
  api: ConversationApi,
): ConversationHandlers<'sendMessage' | 'cancelQueuedMessage' | 'cancel' | 'triggerContinuation'> {
  const { policy } = api;
  return {
    sendMessage: (req, ctx) => sendMessage(api, req, ctx),

    cancelQueuedMessage: (req, ctx) =>
      act(api, ctx, {
        method: 'CancelQueuedMessage',
        conversationId: req.conversationId,
        requestSchema: CancelQueuedMessageRequestSchema,
        request: req,
        responseSchema: CancelQueuedMessageResponseSchema,
        eventType: 'user_cancel_queued',
        event() {
          if (!req.queuedId.trim()) throw new ConnectError('queued_id is required', Code.InvalidArgument);
          return { type: 'user_cancel_queued', queuedId: req.queuedId };
        },
        respond: (result) => create(CancelQueuedMessageResponseSchema, { state: stateToProto(result.record.state, policy) }),
      }),

    cancel: (req, ctx) =>
      act(api, ctx, {
        method: 'Cancel',
        conversationId: req.conversationId,
        requestSchema: CancelRequestSchema,
        request: req,
        responseSchema: CancelResponseSchema,
        eventType: 'user_cancel',
        // What the running tool printed stays in its cancelled result.
        async event(current) {
          const toolOutput = await runningToolOutput(api.options.streams, req.conversationId, current, api.options.logger);
          return { type: 'user_cancel', ...(toolOutput ? { toolOutput } : {}) };
        },
        respond: (result) => create(CancelResponseSchema, { state: stateToProto(result.record.state, policy) }),
      }),

    triggerContinuation: (req, ctx) =>
      act(api, ctx, {
        method: 'TriggerContinuation',
        conversationId: req.conversationId,
        requestSchema: TriggerContinuationRequestSchema,
        request: req,
        responseSchema: TriggerContinuationResponseSchema,
        eventType: 'user_trigger_continuation',
        event: () => ({ type: 'user_trigger_continuation' }),
        respond: (result) => create(TriggerContinuationResponseSchema, { state: stateToProto(result.record.state, policy) }),
      }),
  };
}
