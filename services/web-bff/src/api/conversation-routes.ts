/**
 * The public `bedrock.v1.ConversationService`. Unary calls go to the conversation service as
 * the authenticated user (it enforces ownership: someone else's conversation is NOT_FOUND,
 * sub-agents are listed only under their parent). WatchConversation is served here, from
 * this process's fan-out of the notification streams (../watch/watcher.ts), with the snapshot
 * from GetConversation as the caller.
 */
import type { ConnectRouter, HandlerContext } from '@connectrpc/connect';
import { ConversationService, type WatchConversationRequest, type WatchConversationResponse } from '@bedrock/contracts';
import { serveService, type Logger } from '@bedrock/platform/server';
import type { Upstream } from '../upstream/conversation-client.ts';
import { createForwarder, userOf } from '../upstream/forward.ts';
import { traceHeaders } from '../upstream/trace-headers.ts';
import { mapUpstreamError } from '../upstream/upstream-errors.ts';
import type { Fanout } from '../watch/fanout.ts';
import { createSnapshotCache, type SnapshotCache } from '../watch/snapshot-cache.ts';
import { serveWatch, WatchQuota, type WatchCall, type WatchDeps } from '../watch/watcher.ts';
import { isJsonCodec } from '../watch/shared-response.ts';
import { RAW_EXCHANGE, resetExchange } from '../http/raw-request.ts';
import type { StallWatchdog } from '../watch/stall-watchdog.ts';
import { createOwnershipCache, type OwnershipCache } from '../upstream/ownership-cache.ts';

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
  readonly snapshots?: SnapshotCache;
  /** Receives what serves watches, for the binary gRPC watch path outside connect (../watch/grpc-watch.ts). */
  readonly onWatchDeps?: (deps: WatchDeps) => void;
  /** Watch streams one user may have open in this process (BEDROCK_WATCH_MAX_PER_USER; 0: no limit). Default 0. */
  readonly maxWatchesPerUser?: number;
}

/** How long a watch snapshot is shared by watchers of the same user and conversation that attach after it arrived, ms. */
const SNAPSHOT_SHARE_MS = 1000;

export function registerConversationRoutes(router: ConnectRouter, options: ConversationRoutesOptions): void {
  const { upstream, logger } = options;
  const { client } = upstream;
  const ownership = options.ownership ?? createOwnershipCache(100_000);

  /** Calls the conversation service as the caller, mapping its errors for clients. */
  const call = createForwarder(upstream, logger);

  serveService(router, ConversationService, {
    createConversation: (req, ctx) => call('CreateConversation', ctx, (o) => client.createConversation(req, o)),
    listConversations: (req, ctx) => call('ListConversations', ctx, (o) => client.listConversations(req, o)),
    getConversation: (req, ctx) => call('GetConversation', ctx, (o) => client.getConversation(req, o)),
    sendMessage: (req, ctx) => call('SendMessage', ctx, (o) => client.sendMessage(req, o)),
    cancelQueuedMessage: (req, ctx) => call('CancelQueuedMessage', ctx, (o) => client.cancelQueuedMessage(req, o)),
    cancel: (req, ctx) => call('Cancel', ctx, (o) => client.cancel(req, o)),
    respondToModeUpgrade: (req, ctx) => call('RespondToModeUpgrade', ctx, (o) => client.respondToModeUpgrade(req, o)),
    downgradeMode: (req, ctx) => call('DowngradeMode', ctx, (o) => client.downgradeMode(req, o)),
    triggerContinuation: (req, ctx) => call('TriggerContinuation', ctx, (o) => client.triggerContinuation(req, o)),
    updateConversationSettings: (req, ctx) => call('UpdateConversationSettings', ctx, (o) => client.updateConversationSettings(req, o)),
    renameConversation: (req, ctx) => call('RenameConversation', ctx, (o) => client.renameConversation(req, o)),
    getUsage: (req, ctx) => call('GetUsage', ctx, (o) => client.getUsage(req, o)),
    forkConversation: (req, ctx) => call('ForkConversation', ctx, (o) => client.forkConversation(req, o)),
    async deleteConversation(req, ctx) {
      const res = await call('DeleteConversation', ctx, (o) => client.deleteConversation(req, o));
      for (const id of res.deletedIds) ownership.forget(userOf(ctx), id);
      return res;
    },
    watchConversation: (req, ctx) => watch(req, ctx),
  });

  const watchDeps: WatchDeps = {
    fanout: options.fanout,
    snapshots: options.snapshots ?? createSnapshotCache(SNAPSHOT_SHARE_MS),
    ownership,
    watchdog: options.watchdog,
    logger,
    heartbeatMs: options.heartbeatMs,
    maxLagMs: options.maxLagMs,
    quota: new WatchQuota(options.maxWatchesPerUser ?? 0),
    ...(options.onWatchers ? { onWatchers: options.onWatchers } : {}),
    async fetchSnapshot(user, id, requestHeader) {
      // No caller signal: the answer may be shared by several watchers of this user (one leaving must not cancel it).
      const base = upstream.options(user);
      const got = await client.getConversation(
        { conversationId: id },
        { ...base, headers: { ...(base.headers as Record<string, string>), ...traceHeaders(requestHeader) } },
      );
      ownership.remember(user, id);
      return { conversation: got.conversation!, messages: got.messages, sequence: got.sequence, subAgents: got.subAgents };
    },
    mapError: (err, signal) => mapUpstreamError(err, logger, 'GetConversation', signal),
  };
  options.onWatchDeps?.(watchDeps);

  function watch(req: WatchConversationRequest, ctx: HandlerContext): AsyncGenerator<WatchConversationResponse> {
    const raw = ctx.values.get(RAW_EXCHANGE);
    const call: WatchCall = {
      user: userOf(ctx),
      signal: ctx.signal,
      requestHeader: () => ctx.requestHeader,
      reset: () => raw && resetExchange(raw),
    };
    const json = isJsonCodec(ctx.requestHeader.get('content-type'));
    return serveWatch(call, req, watchDeps, (event) => event.response(json));
  }
}
