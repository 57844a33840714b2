/**
 * One open conversation as the view uses it: its state from the watch stream (session-state.ts) and the user's actions,
 * each retried with one request id: send (queued, steered or interrupting), withdraw a waiting message, cancel, fork,
 * delete, answer a mode upgrade or step down, summarise and continue; an action's error is the `alert`.
 */
import { DeliveryMode } from '@bedrock/contracts';
import { retrying } from '@bedrock/agent-view/retry';
import { errorText, isUnauthenticated } from './api.ts';
import { SessionState } from './session-state.ts';
import { placeOf } from './workspaces.ts';

/** How the composer sends a message: queued (the default), steered in at the next tool boundary, or interrupting the turn. */
export type Delivery = 'queue' | 'steer' | 'interrupt';

/** An image picked in the composer, sent with a message. */
export interface Attachment {
  readonly mediaType: string;
  readonly data: Uint8Array;
}

const DELIVERY: Record<Delivery, DeliveryMode> = {
  queue: DeliveryMode.QUEUE,
  steer: DeliveryMode.STEER,
  interrupt: DeliveryMode.INTERRUPT,
};

/** What a fork attempt came to: opened, or the service's refusal in its words. */
export type ForkOutcome = { ok: true } | { ok: false; message: string };

export class Session extends SessionState {
  alert = '';
  /** Messages sent from this page: the transcript follows the newest again after each. */
  sent = 0;

  showError(message: string): void {
    this.alert = message;
    this.changed();
  }

  dismissError(): void {
    this.alert = '';
    this.changed();
  }

  /**
   * Runs one user action: a fresh request id, and while the server cannot be reached the same
   * request again with the same id, so it is applied once however many tries it takes.
   */
  async act(fn: (requestId: string) => Promise<unknown>): Promise<boolean> {
    try {
      await retrying(fn, {
        onRetry: ({ attempt, attempts, error }) =>
          this.showError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`),
      });
      if (this.alert) this.dismissError();
      return true;
    } catch (err) {
      if (isUnauthenticated(err)) this.deps.authFailed(errorText(err));
      else this.showError(errorText(err));
      return false;
    }
  }

  /**
   * The composer's message. At rest every delivery sends it at once; while the agent works the
   * service keeps it (`queue`: when the turn ends; `steer`: at the next tool boundary;
   * `interrupt`: the turn is cancelled and it goes out once stopped) and lists it in the state,
   * which is what the view shows — so a reload, or a message queued from the CLI, shows the same.
   */
  submit(text: string, images: Attachment[], delivery: Delivery = 'queue'): Promise<boolean> {
    // The transcript goes to the bottom (where the message appears) and follows again.
    this.sent++;
    this.changed();
    return this.act((requestId) =>
      this.deps.api.sendMessage({ conversationId: this.id, text, images, requestId, delivery: DELIVERY[delivery] }),
    );
  }

  /** Withdraws a waiting message (CancelQueuedMessage); the next state says it is gone. */
  unqueue(queuedId: string): void {
    void this.act((requestId) => this.deps.api.cancelQueuedMessage({ conversationId: this.id, queuedId, requestId }));
  }

  /** The box is empty but messages wait: cancel, and the service sends the first of them once stopped (a cancel keeps the queue). */
  cancelAndSendWaiting(): void {
    this.cancel();
  }

  cancel(): void {
    if (this.canCancel) void this.act((requestId) => this.deps.api.cancel({ conversationId: this.id, requestId }));
  }

  /**
   * A new conversation from this one's history up to message `atSequence` (with its own copy of
   * the workspace's files as they were there, `withFiles`), then opened. The
   * service refuses a place inside a tool call (naming the nearest ones that work): that answer
   * is returned for the view to show beside the message.
   */
  async fork(atSequence: bigint, withFiles = false): Promise<ForkOutcome> {
    try {
      // One request id for every attempt: a retry answers the fork the first attempt made.
      const res = await retrying(
        (requestId) => this.deps.api.forkConversation({ conversationId: this.id, atMessage: atSequence, withFiles, requestId }),
        {
          onRetry: ({ attempt, attempts, error }) =>
            this.showError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`),
        },
      );
      if (this.alert) this.dismissError();
      this.deps.listChanged();
      if (res.conversation) this.deps.navigate(`/c/${encodeURIComponent(res.conversation.id)}`);
      return { ok: true };
    } catch (err) {
      if (this.alert) this.dismissError();
      if (isUnauthenticated(err)) this.deps.authFailed(errorText(err));
      return { ok: false, message: errorText(err) };
    }
  }

  /** Deletes the conversation (and its sub-agents); then back to the start page. False when the service refused. */
  async deleteConversation(): Promise<boolean> {
    const ok = await this.act((requestId) => this.deps.api.deleteConversation({ conversationId: this.id, requestId }));
    if (ok) {
      this.dispose();
      this.deps.listChanged();
      this.deps.navigate('/');
    }
    return ok;
  }

  async respond(approve: boolean): Promise<void> {
    await this.act((requestId) => this.deps.api.respondToModeUpgrade({ conversationId: this.id, approve, requestId }));
  }

  downgrade(): void {
    void this.act((requestId) => this.deps.api.downgradeMode({ conversationId: this.id, requestId }));
  }

  summariseAndContinue(): void {
    void this.act((requestId) => this.deps.api.triggerContinuation({ conversationId: this.id, requestId }));
  }

  async continueFrom(): Promise<void> {
    const from = this.conversation;
    if (!from) return;
    const place = await placeOf(from, this.deps.workspaces);
    await this.act(async (requestId) => {
      const res = await this.deps.api.createConversation({ ...place, model: from.model, continueFromId: from.id, requestId });
      this.deps.listChanged();
      if (res.conversation) this.deps.navigate(`/c/${res.conversation.id}`);
    });
  }
}
