/**
 * The message box: text, image attachments (file picker, paste or drop; PNG, JPEG, GIF, WebP within
 * the service's limits), Send, and Cancel while the agent works. While it works the box stays open
 * and each message goes with a delivery mode (queue, steer, interrupt); the messages waiting are
 * listed above the box, each removable. docs/web-ui.md, "Typing while it works".
 */
import { DeliveryMode, type PendingMessage } from '@bedrock/contracts';
import { IMAGE_TYPES, imageProblem } from '@bedrock/agent-view/format';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Attachment, Delivery } from './session.ts';

export interface ComposerProps {
  readonly busy: boolean;
  readonly canCancel: boolean;
  /** Why the agent is not taking messages right now (said under the box), or ''. */
  readonly hint: string;
  /**
   * The messages waiting in the conversation (`state.pending_messages`), in the order they will
   * go: the conversation's own, so a reload, or a message queued from the CLI, shows the same list.
   */
  readonly pending: readonly PendingMessage[];
  /** Resolves true when the message was accepted or queued (the box is then cleared). */
  submit(text: string, images: Attachment[], delivery: Delivery): Promise<boolean>;
  cancel(): void;
  /** "Cancel and send now" with an empty box: cancel; the first waiting message goes out once stopped. */
  cancelAndSendWaiting(): void;
  unqueue(queuedId: string): void;
  problem(message: string): void;
  /** Called once with a function that focuses the box (the `/` shortcut). */
  focusRef?(focus: () => void): void;
}

interface Pending {
  readonly file: File;
  readonly url: string;
}

let focusOnOpen = false;
/** The next message box to open takes the focus (after Start in the new-conversation form). */
export function focusComposerOnOpen(): void {
  focusOnOpen = true;
}

/**
 * Enter sends, Shift+Enter starts a new line. While the agent works the service keeps what is
 * sent: Enter queues it for when the turn ends, Alt+Enter (or Steer) gives it to the agent at the
 * next tool boundary, "Cancel and send now" interrupts the turn with it.
 */
export function Composer(props: ComposerProps) {
  const [pending, setPending] = useState<Pending[]>([]);
  /** Sends on their way (they go one after the other, in order). */
  const [sending, setSending] = useState(0);
  const sends = useRef<Promise<void>>(Promise.resolve());
  const [hasText, setHasText] = useState(false);
  const input = useRef<HTMLTextAreaElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const pendingRef = useRef(pending);
  pendingRef.current = pending;

  useEffect(() => {
    props.focusRef?.(() => input.current?.focus());
    // A conversation just started here: the next thing is its first message.
    if (focusOnOpen) {
      focusOnOpen = false;
      input.current?.focus();
    }
    return () => pendingRef.current.forEach((p) => URL.revokeObjectURL(p.url));
  }, []);

  const addFiles = (files: File[]) => {
    const next = [...pendingRef.current];
    for (const file of files) {
      const problem = imageProblem(file.type, file.size, next.length);
      if (problem) {
        props.problem(`${file.name}: ${problem}`);
        continue;
      }
      next.push({ file, url: URL.createObjectURL(file) });
    }
    setPending(next);
  };

  const remove = (i: number) => {
    const next = [...pending];
    const [p] = next.splice(i, 1);
    if (p) URL.revokeObjectURL(p.url);
    setPending(next);
    input.current?.focus();
  };

  /**
   * Sends what the box holds with this delivery. The box is emptied at once, so the next message
   * can be typed (and sent) while this one is on its way; sends go out one after the other, in
   * the order they were made. One the service did not take comes back into the box, before
   * anything typed since, with its images.
   */
  const submit = (delivery: Delivery = 'queue') => {
    const box = input.current;
    if (!box) return;
    const text = box.value;
    const attached = pendingRef.current;
    if (!text.trim() && attached.length === 0) return;
    box.value = '';
    setHasText(false);
    setPending([]);
    const send = props.submit;
    setSending((n) => n + 1);
    sends.current = sends.current.then(async () => {
      try {
        const images = await Promise.all(
          attached.map(async (p) => ({ mediaType: p.file.type, data: new Uint8Array(await p.file.arrayBuffer()) })),
        );
        if (await send(text, images, delivery)) {
          attached.forEach((p) => URL.revokeObjectURL(p.url));
          return;
        }
        const now = input.current;
        if (now) {
          now.value = now.value ? `${text}\n\n${now.value}` : text;
          setHasText(now.value.trim() !== '');
        }
        setPending((current) => [...attached, ...current]);
      } finally {
        setSending((n) => n - 1);
      }
    });
  };

  const typed = hasText || pending.length > 0;
  const interrupt = () => {
    if (typed) submit('interrupt');
    else props.cancelAndSendWaiting();
  };
  return (
    <form
      class="composer"
      aria-label="Send a message"
      onSubmit={(ev) => {
        ev.preventDefault();
        submit();
      }}
      onDragOver={(ev) => ev.preventDefault()}
      onDrop={(ev) => {
        const files = [...(ev.dataTransfer?.files ?? [])];
        if (files.length) {
          ev.preventDefault();
          addFiles(files);
        }
      }}
    >
      {props.pending.length ? <PendingList pending={props.pending} unqueue={props.unqueue} /> : null}
      {props.busy ? (
        <div class="composer-ways" role="group" aria-label="Other ways to send while the agent works">
          <button
            type="button"
            class="small"
            disabled={!typed}
            aria-keyshortcuts="Alt+Enter"
            title="Send at the next tool boundary: the agent reads it before its next step, without stopping its turn (Alt+Enter)"
            onClick={() => submit('steer')}
          >
            Steer
          </button>
          <button
            type="button"
            class="small warn"
            disabled={!props.canCancel || (!typed && props.pending.length === 0)}
            title={
              typed
                ? 'Cancel the running turn and send this message as soon as it has stopped'
                : 'Cancel the running turn; the first waiting message goes out as soon as it has stopped'
            }
            onClick={interrupt}
          >
            Cancel and send now
          </button>
        </div>
      ) : null}
      <label for="message-input" class="visually-hidden">
        Message
      </label>
      {pending.length ? (
        <ul class="attachments" aria-label="Attached images">
          {pending.map((p, i) => (
            <li class="attachment" key={p.url}>
              <img src={p.url} alt={p.file.name} class="thumb" />
              <button type="button" class="remove" aria-label={`Remove ${p.file.name}`} onClick={() => remove(i)}>
                ×
              </button>
            </li>
          ))}
        </ul>
      ) : null}
      <div class="composer-row">
        <button
          type="button"
          class="secondary attach"
          aria-label="Attach image"
          title="Attach image (or paste or drop one)"
          onClick={() => fileInput.current?.click()}
        >
          <span aria-hidden="true">{'+ '}</span>
          <span class="attach-word">Image</span>
        </button>
        <input
          ref={fileInput}
          type="file"
          accept={IMAGE_TYPES.join(',')}
          multiple
          class="visually-hidden"
          tabIndex={-1}
          aria-hidden="true"
          onChange={(ev) => {
            const el = ev.currentTarget;
            addFiles([...(el.files ?? [])]);
            el.value = '';
          }}
        />
        <textarea
          id="message-input"
          ref={input}
          rows={2}
          placeholder={props.busy ? 'Type your next message: it is sent when the agent finishes' : 'Message the agent…'}
          aria-describedby="composer-hint"
          aria-keyshortcuts="/"
          onKeyDown={(ev) => {
            if (ev.key === 'Enter' && !ev.shiftKey && !ev.isComposing) {
              ev.preventDefault();
              // Alt+Enter steers (at rest it simply sends, as every delivery does).
              submit(ev.altKey ? 'steer' : 'queue');
            }
          }}
          onInput={(ev) => setHasText(ev.currentTarget.value.trim() !== '')}
          onPaste={(ev) => {
            const files = [...(ev.clipboardData?.files ?? [])];
            if (files.length) {
              ev.preventDefault();
              addFiles(files);
            }
          }}
        />
        <div class="composer-buttons">
          {props.busy ? (
            <button
              type="button"
              class="danger"
              disabled={!props.canCancel}
              aria-keyshortcuts="Escape"
              title="Cancel the running turn (Esc)"
              onClick={() => props.cancel()}
            >
              Cancel
            </button>
          ) : null}
          <button
            type="submit"
            class="primary"
            aria-busy={sending > 0 ? 'true' : undefined}
            title={props.busy ? 'Queue this message (Enter)' : 'Send (Enter)'}
          >
            {props.busy ? 'Queue' : 'Send'}
          </button>
        </div>
      </div>
      <p id="composer-hint" class={props.hint ? 'composer-hint composer-hint-now' : 'composer-hint'}>
        {props.hint || 'Enter to send · Shift+Enter for a new line · / to come back here'}
      </p>
    </form>
  );
}

/** How each waiting message goes out, in words. */
const WAYS: Partial<Record<DeliveryMode, { readonly badge: string; readonly when: string }>> = {
  [DeliveryMode.QUEUE]: { badge: 'Queued', when: 'sent when the turn ends' },
  [DeliveryMode.STEER]: { badge: 'Steer', when: 'given to the agent at the next tool boundary' },
  [DeliveryMode.INTERRUPT]: { badge: 'Interrupt', when: 'sent once the cancel completes' },
};

/**
 * The messages waiting in the conversation, in the order they go, each with its mode and (unless
 * read-only) a Remove button. Read-only in a full conversation: they are never sent there, but
 * stay listed so they can be taken to the continued one.
 */
export function PendingList({
  pending,
  unqueue,
  readOnly = false,
}: {
  pending: readonly PendingMessage[];
  unqueue?: (queuedId: string) => void;
  readOnly?: boolean;
}) {
  const n = pending.length;
  return (
    <div class="queue" data-testid="queue">
      <p class="queue-head" id="queue-head">
        {n === 1 ? '1 message waits' : `${n} messages wait`}
        {readOnly ? ', never sent: the conversation is full' : ''}
      </p>
      <ol class="queue-list" aria-labelledby="queue-head">
        {pending.map((q, i) => {
          const way = WAYS[q.delivery] ?? WAYS[DeliveryMode.QUEUE]!;
          return (
            <li key={q.id} class="queued" data-delivery={DeliveryMode[q.delivery]?.toLowerCase()}>
              <span class={`queued-mode queued-${DeliveryMode[q.delivery]?.toLowerCase()}`} title={way.when}>
                {way.badge}
              </span>
              <span class="queued-text">
                {q.text || '(images only)'}
                {q.imageCount ? ` · ${q.imageCount} image${q.imageCount === 1 ? '' : 's'}` : ''}
              </span>
              <span class="visually-hidden">, {way.when}</span>
              {readOnly || !unqueue ? null : (
                <button type="button" class="small" aria-label={`Remove queued message ${i + 1}`} onClick={() => unqueue(q.id)}>
                  Remove
                </button>
              )}
            </li>
          );
        })}
      </ol>
    </div>
  );
}
