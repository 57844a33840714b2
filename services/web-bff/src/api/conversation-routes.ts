/**
 * The public `bedrock.v1.ConversationService`. Unary calls go to the conversation service as
 * the authenticated user (it enforces ownership: someone else's conversation is NOT_FOUND,
 * sub-agents are listed only under their parent). WatchConversation is served here, from
 * this process's fan-out of the notification streams, with the snapshot from GetConversation.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { ConversationService, type WatchConversationRequest, type WatchConversationResponse } from '@bedrock/contracts';
import type { Logger } from '@bedrock/platform/server';
import { watchConversation } from '@bedrock/platform/watch';
import { USER_KEY } from '../auth/auth-interceptor.ts';
import { RAW_EXCHANGE, resetExchange } from '../http/raw-request.ts';
import type { Upstream } from '../upstream/conversation-client.ts';
import { traceHeaders } from '../upstream/trace-headers.ts';
import { mapUpstreamError } from '../upstream/upstream-errors.ts';
import { watchLagError, type Fanout } from '../watch/fanout.ts';
import type { StallWatchdog } from '../watch/stall-watchdog.ts';
import { createOwnershipCache, type OwnershipCache } from './ownership-cache.ts';

export interface ConversationRoutesOptions {
  readonly upstream: Upstream;
  readonly fanout: Fanout;
  readonly watchdog: StallWatchdog;
  readonly logger: Logger;
  /** Heartbeat interval of watch streams, ms. */
  readonly heartbeatMs: number;
  /** Slow-watcher cut-off (the fan-out's), ms; named in the error. */
  readonly maxLagMs: number;
  /** Called with +1/-1 as watch streams open and close (metrics). */
  readonly onWatchers?: (delta: number) => void;
  readonly ownership?: OwnershipCache;
}

function userOf(ctx: HandlerContext): string {
  const user = ctx.values.get(USER_KEY);
  // The auth interceptor runs before every handler of this service; reaching here without a user is a wiring bug.
  if (!user) throw new ConnectError('missing bearer token', Code.Unauthenticated);
  return user;
}

export function registerConversationRoutes(router: ConnectRouter, options: ConversationRoutesOptions): void {
  const { upstream, logger } = options;
  const { client } = upstream;
  const ownership = options.ownership ?? createOwnershipCache(100_000);

  /** Calls the conversation service as the caller, mapping its errors for clients. */
  async function call<T>(method: string, ctx: HandlerContext, fn: (opts: ReturnType<Upstream['options']>) => Promise<T>): Promise<T> {
    const base = upstream.options(userOf(ctx), ctx.signal);
    const opts = { ...base, headers: { ...(base.headers as Record<string, string>), ...traceHeaders(ctx.requestHeader) } };
    try {
      return await fn(opts);
    } catch (err) {
      throw mapUpstreamError(err, logger, method, ctx.signal);
    }
  }

  router.service(ConversationService, {
    createConversation: (req, ctx) => call('CreateConversation', ctx, (o) => client.createConversation(req, o)),
    listConversations: (req, ctx) => call('ListConversations', ctx, (o) => client.listConversations(req, o)),
    getConversation: (req, ctx) => call('GetConversation', ctx, (o) => client.getConversation(req, o)),
    sendMessage: (req, ctx) => call('SendMessage', ctx, (o) => client.sendMessage(req, o)),
    cancel: (req, ctx) => call('Cancel', ctx, (o) => client.cancel(req, o)),
    respondToModeUpgrade: (req, ctx) => call('RespondToModeUpgrade', ctx, (o) => client.respondToModeUpgrade(req, o)),
    downgradeMode: (req, ctx) => call('DowngradeMode', ctx, (o) => client.downgradeMode(req, o)),
    triggerContinuation: (req, ctx) => call('TriggerContinuation', ctx, (o) => client.triggerContinuation(req, o)),
    updateConversationSettings: (req, ctx) => call('UpdateConversationSettings', ctx, (o) => client.updateConversationSettings(req, o)),
    watchConversation: (req, ctx) => watch(req, ctx),
  });

  async function* watch(req: WatchConversationRequest, ctx: HandlerContext): AsyncGenerator<WatchConversationResponse> {
    const user = userOf(ctx);
    const id = req.conversationId;
    if (!id.trim()) throw new ConnectError('conversation_id is required', Code.InvalidArgument);
    const fresh = req.afterSequence === 0n && req.afterDeltaIndex === 0;
    const snapshot = () =>
      call('GetConversation', ctx, async (o) => {
        const got = await client.getConversation({ conversationId: id }, o);
        ownership.remember(user, id);
        return { conversation: got.conversation!, messages: got.messages, sequence: got.sequence };
      });
    // A resume skips the snapshot, so ownership is checked here (once per user and conversation: it never changes).
    if (!fresh && !ownership.has(user, id)) {
      await call('GetConversation', ctx, (o) => client.getConversation({ conversationId: id }, o));
      ownership.remember(user, id);
    }

    const streams = options.fanout.subscribe(id);
    const raw = ctx.values.get(RAW_EXCHANGE);
    const write = { writingSince: undefined as number | undefined, reset: () => raw && resetExchange(raw) };
    const untrack = options.watchdog.track(write);
    options.onWatchers?.(1);
    try {
      const events = watchConversation({
        conversationId: id,
        after: { sequence: req.afterSequence, deltaIndex: req.afterDeltaIndex },
        streams,
        snapshot,
        heartbeatMs: options.heartbeatMs,
        signal: ctx.signal,
      });
      let sent = { sequence: req.afterSequence, deltaIndex: req.afterDeltaIndex };
      for await (const response of events) {
        if (streams.lagExceeded()) throw watchLagError(sent, options.maxLagMs);
        write.writingSince = Date.now();
        yield response;
        write.writingSince = undefined;
        sent = { sequence: response.event!.sequence, deltaIndex: response.event!.deltaIndex };
      }
    } catch (err) {
      if (err instanceof ConnectError) throw err;
      logger.warn({ err, conversation_id: id }, 'watch failed reading the notification stream');
      throw new ConnectError('the notification stream is unavailable; resume from the last event you saw', Code.Unavailable);
    } finally {
      untrack();
      streams.release();
      options.onWatchers?.(-1);
    }
  }
}
