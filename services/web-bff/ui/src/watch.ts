/**
 * A resumable WatchConversation: a snapshot, then events; after a disconnect it resumes
 * from the last (sequence, delta_index) seen, with backoff, until stopped or told the
 * conversation is gone or the token is refused.
 */
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { ConversationEvent, ConversationService } from '@bedrock/contracts';

/** The one call the watch needs (kept apart from api.ts so this file needs no DOM). */
type WatchClient = Pick<Client<typeof ConversationService>, 'watchConversation'>;

/** Errors after which a watch stream should not be resumed. */
function isFinal(err: unknown): boolean {
  const code = ConnectError.from(err).code;
  return code === Code.Unauthenticated || code === Code.NotFound || code === Code.PermissionDenied || code === Code.InvalidArgument;
}

/**
 * Events are handled for at most this long before other tasks get a turn: what piled up while
 * the page was busy arrives in one read, and handling it all at once would be one long task.
 */
const SLICE_MS = 10;

/** Lets other tasks run first (a message, which a background tab does not slow down as it does timers). */
function yieldToOthers(): Promise<void> {
  return new Promise((resolve) => {
    const channel = new MessageChannel();
    channel.port1.addEventListener('message', () => {
      channel.port1.close();
      resolve();
    });
    channel.port1.start();
    channel.port2.postMessage(null);
  });
}

export interface WatchHandlers {
  event(e: ConversationEvent): void;
  /** Called with false when the stream broke (a resume follows), true when events flow again. */
  connected(ok: boolean): void;
  /** The stream cannot be resumed (NotFound, Unauthenticated…). */
  failed(err: unknown): void;
}

export function watch(api: WatchClient, conversationId: string, handlers: WatchHandlers): () => void {
  const stop = new AbortController();
  let sequence = 0n;
  let deltaIndex = 0;
  void (async () => {
    let backoffMs = 500;
    while (!stop.signal.aborted) {
      try {
        const stream = api.watchConversation(
          { conversationId, afterSequence: sequence, afterDeltaIndex: deltaIndex },
          { signal: stop.signal },
        );
        let first = true;
        let slice = performance.now();
        for await (const res of stream) {
          if (first) handlers.connected(true);
          first = false;
          backoffMs = 500;
          const e = res.event;
          if (!e) continue;
          if (e.kind.case !== 'heartbeat') {
            sequence = e.sequence;
            deltaIndex = e.deltaIndex;
          }
          handlers.event(e);
          if (performance.now() - slice > SLICE_MS) {
            await yieldToOthers();
            slice = performance.now();
          }
        }
      } catch (err) {
        if (stop.signal.aborted) return;
        if (isFinal(err)) {
          handlers.failed(err);
          return;
        }
      }
      if (stop.signal.aborted) return;
      handlers.connected(false);
      await new Promise((r) => setTimeout(r, backoffMs));
      backoffMs = Math.min(backoffMs * 2, 10_000);
    }
  })();
  return () => stop.abort();
}
