/**
 * Watching from the CLI: a watch that resumes by itself after a disconnect or a slow-client
 * cut-off, from the last position seen; and a turn runner that sends something and follows
 * the conversation until it comes to rest.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import { isResting, MessageType, rejectionOf, StateKind, type ConversationEvent, type ConversationState } from '@bedrock/contracts';
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

export interface ResumeOptions {
  /** How long the server may stay unreachable before the watch gives up (BEDROCK_RETRY_FOR; default 30 s). */
  readonly budgetMs?: number;
  /** Told before each attempt to resume. */
  readonly onResume?: (notice: { attempt: number; delayMs: number; error: ConnectError }) => void;
}

/**
 * Events of a conversation from a snapshot on; ends on abort. A watch never ends by itself, so
 * a stream that fails with a resumable code, or that the server ends (it is shutting down), is
 * opened again after the last event seen, with backoff (0.25 s doubling to 5 s, ±20%); once the
 * server has been unreachable for longer than the budget it throws, saying for how long.
 */
export async function* resumingWatch(
  client: ApiClient,
  conversationId: string,
  signal: AbortSignal,
  resume: ResumeOptions = {},
  /** Start after this stream position (GetConversationResponse.sequence) instead of with a snapshot. */
  from = 0n,
): AsyncGenerator<ConversationEvent> {
  const budgetMs = resume.budgetMs ?? 30_000;
  let after = { sequence: from, deltaIndex: 0 };
  /** Failed attempts since the last event, and when the first of them failed. */
  let failures = 0;
  let downSince = 0;
  while (!signal.aborted) {
    let error: ConnectError;
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
      if (signal.aborted) return;
      error = new ConnectError('the server ended the watch', Code.Unavailable);
    } catch (err) {
      if (signal.aborted) return;
      error = ConnectError.from(err);
      if (!RESUMABLE.has(error.code)) throw err;
      // A limit (e.g. the user's watch streams on this server) is not lifted by trying again at once.
      if (rejectionOf(error)?.code === 'limit_reached') throw err;
    }
    const now = Date.now();
    if (failures++ === 0) downSince = now;
    const delayMs = Math.round(Math.min(5000, 250 * 2 ** (failures - 1)) * (0.8 + 0.4 * Math.random()));
    const downMs = now - downSince;
    if (downMs + delayMs > budgetMs)
      throw new ConnectError(
        `${error.rawMessage} (gave up resuming the watch after ${failures} attempt${failures === 1 ? '' : 's'} over ${(downMs / 1000).toFixed(1)}s; BEDROCK_RETRY_FOR sets how long)`,
        error.code,
      );
    resume.onResume?.({ attempt: failures, delayMs, error });
    await new Promise<void>((r) => {
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        r();
      };
      const timer = setTimeout(done, delayMs);
      signal.addEventListener('abort', done, { once: true });
    });
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
  readonly resume?: ResumeOptions;
  /**
   * Follow from this stream position (what a GetConversation reflected) and start at once,
   * rather than start at the watch's snapshot, which may be a little older than what the
   * caller saw (web-bff shares snapshots among watchers): the events that follow it could
   * replay a state the caller already answered.
   */
  readonly after?: bigint;
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
  /** The sent message has been seen: from here on the events are this turn's. */
  let ownTurn = false;
  try {
    if (options.after !== undefined && options.after > 0n) {
      started = options.start();
      sentId = await started;
      startedState = true;
    }
    for await (const event of resumingWatch(options.client, options.conversationId, local.signal, options.resume, options.after)) {
      if (event.kind.case === 'snapshot') {
        if (!started) {
          started = options.start();
          sentId = await started;
          startedState = true;
        }
        continue;
      }
      if (event.kind.case === 'messagePersisted' && event.kind.value.message?.type === MessageType.USER)
        lastUser = event.kind.value.message.id;
      // The watch's snapshot may be older than the send (web-bff shares snapshots among
      // watchers): what follows it until the sent message is the turn before, already said.
      if (sentId !== undefined && !ownTurn) {
        if (lastUser !== sentId) continue;
        ownTurn = true;
      }
      options.onEvent(event);
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
