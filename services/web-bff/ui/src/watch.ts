/**
 * A resumable WatchConversation: a snapshot, then events; after a disconnect it resumes
 * from the last (sequence, delta_index) seen, with backoff, until stopped or told the
 * conversation is gone or the token is refused.
 */
import type { ConversationEvent } from '@bedrock/contracts';
import type { Api } from './api.ts';
import { isFinal } from './api.ts';

export interface WatchHandlers {
  event(e: ConversationEvent): void;
  /** Called with false when the stream broke (a resume follows), true when events flow again. */
  connected(ok: boolean): void;
  /** The stream cannot be resumed (NotFound, Unauthenticated…). */
  failed(err: unknown): void;
}

export function watch(api: Api, conversationId: string, handlers: WatchHandlers): () => void {
  const stop = new AbortController();
  let sequence = 0n;
  let deltaIndex = 0;
  void (async () => {
    let backoffMs = 500;
    while (!stop.signal.aborted) {
      try {
        const stream = api.watchConversation({ conversationId, afterSequence: sequence, afterDeltaIndex: deltaIndex }, { signal: stop.signal });
        let first = true;
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
