/**
 * Watching from the CLI: a watch that resumes by itself after a disconnect or a slow-client
 * cut-off, from the last position seen; and a turn runner that sends something and follows
 * the conversation until it comes to rest.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { isResting, MessageType, StateKind, type ConversationEvent, type ConversationState } from '@bedrock/contracts';
import type { ApiClient } from './connection.ts';

/** Codes after which a watch is resumed rather than given up. */
const RESUMABLE = new Set<Code>([
  Code.Unavailable,
  Code.ResourceExhausted,
  Code.Internal,
  Code.Unknown,
  Code.DeadlineExceeded,
  Code.Aborted,
]);
const MAX_RESUMES = 20;

/** Events of a conversation from a snapshot on, resuming after failures; ends on abort. */
export async function* resumingWatch(client: ApiClient, conversationId: string, signal: AbortSignal): AsyncGenerator<ConversationEvent> {
  let after = { sequence: 0n, deltaIndex: 0 };
  let failures = 0;
  while (!signal.aborted) {
    try {
      for await (const res of client.watchConversation(
        { conversationId, afterSequence: after.sequence, afterDeltaIndex: after.deltaIndex },
        { signal },
      )) {
        const e = res.event!;
        failures = 0;
        after = { sequence: e.sequence, deltaIndex: e.deltaIndex };
        yield e;
      }
      return;
    } catch (err) {
      if (signal.aborted) return;
      const e = ConnectError.from(err);
      if (!RESUMABLE.has(e.code) || ++failures > MAX_RESUMES) throw err;
      await new Promise((r) => setTimeout(r, Math.min(100 * 2 ** failures, 3000)));
    }
  }
}

/** Whether a conversation waits for the user (or is finished): at rest, or asking to approve a mode upgrade. */
export function waitsForUser(kind: StateKind): boolean {
  return isResting(kind) || kind === StateKind.AWAITING_MODE_APPROVAL;
}

export interface TurnOptions {
  readonly client: ApiClient;
  readonly conversationId: string;
  /** Starts the turn once the watch has its snapshot; returns the id of the user message it persisted, if any. */
  readonly start: () => Promise<string | undefined>;
  readonly onEvent: (event: ConversationEvent) => void;
  /** Called at rest; return true to keep following (e.g. after answering an approval request). */
  readonly onRest?: (state: ConversationState) => Promise<boolean>;
  readonly signal: AbortSignal;
}

/**
 * Follows one turn: opens the watch first (so nothing is missed), starts the turn, and
 * returns the state in which the conversation comes to rest after it.
 */
export async function followTurn(options: TurnOptions): Promise<ConversationState | undefined> {
  const { signal } = options;
  const local = new AbortController();
  const abort = () => local.abort();
  signal.addEventListener('abort', abort, { once: true });
  let started: Promise<string | undefined> | undefined;
  let sentId: string | undefined;
  let startedState = false;
  /** Persisted user message ids seen, and whether a rest state followed each. */
  let lastUser: string | undefined;
  try {
    for await (const event of resumingWatch(options.client, options.conversationId, local.signal)) {
      if (event.kind.case === 'snapshot') {
        if (!started) {
          started = options.start();
          sentId = await started;
          startedState = true;
        }
        continue;
      }
      options.onEvent(event);
      if (event.kind.case === 'messagePersisted' && event.kind.value.message?.type === MessageType.USER)
        lastUser = event.kind.value.message.id;
      if (event.kind.case !== 'stateChanged') continue;
      const state = event.kind.value.state;
      if (!state || !waitsForUser(state.kind) || !startedState) continue;
      // A turn started by a message rests only after that message; other actions (cancel, approve) after any change.
      if (sentId !== undefined && lastUser !== sentId) continue;
      if (options.onRest && (await options.onRest(state))) continue;
      return state;
    }
    return undefined;
  } finally {
    signal.removeEventListener('abort', abort);
    local.abort();
  }
}
