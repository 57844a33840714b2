/**
 * The message box: text, image attachments (file picker, paste or drop; PNG, JPEG, GIF, WebP
 * within the service's limits), Send, and Cancel while the agent works. Enter sends, Shift+Enter
 * starts a new line. While the agent works the box stays open: a message sent then waits in a
 * queue shown above the box (each removable) and goes out when the turn comes to rest, or at
 * once with "Cancel and send".
 */
import { IMAGE_TYPES, imageProblem } from '@bedrock/agent-view/format';
import { useEffect, useRef, useState } from 'preact/hooks';

export interface Attachment {
  readonly mediaType: string;
  readonly data: Uint8Array;
}

export interface Outgoing {
  readonly id: number;
  readonly text: string;
  readonly images: Attachment[];
}

export interface ComposerProps {
  readonly busy: boolean;
  readonly canCancel: boolean;
  /** Why the agent is not taking messages right now (said under the box), or ''. */
  readonly hint: string;
  readonly queue: readonly Outgoing[];
  /** Resolves true when the message was accepted or queued (the box is then cleared). */
  submit(text: string, images: Attachment[]): Promise<boolean>;
  cancel(): void;
  cancelAndSend(): void;
  unqueue(id: number): void;
  problem(message: string): void;
  /** Called once with a function that focuses the box (the `/` shortcut). */
  focusRef?(focus: () => void): void;
}

interface Pending {
  readonly file: File;
  readonly url: string;
}

export function Composer(props: ComposerProps) {
  const [pending, setPending] = useState<Pending[]>([]);
  const [sending, setSending] = useState(false);
  const input = useRef<HTMLTextAreaElement>(null);
  const fileInput = useRef<HTMLInputElement>(null);
  const pendingRef = useRef(pending);
  pendingRef.current = pending;

  useEffect(() => {
    props.focusRef?.(() => input.current?.focus());
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

  const submit = async () => {
    const box = input.current;
    if (!box || sending) return;
    const text = box.value;
    if (!text.trim() && pending.length === 0) return;
    setSending(true);
    try {
      const images = await Promise.all(
        pending.map(async (p) => ({ mediaType: p.file.type, data: new Uint8Array(await p.file.arrayBuffer()) })),
      );
      if (await props.submit(text, images)) {
        box.value = '';
        pending.forEach((p) => URL.revokeObjectURL(p.url));
        setPending([]);
      }
    } finally {
      setSending(false);
    }
  };

  const queued = props.queue.length;
  return (
    <form
      class="composer"
      aria-label="Send a message"
      onSubmit={(ev) => {
        ev.preventDefault();
        void submit();
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
      {queued ? (
        <div class="queue" data-testid="queue">
          <p class="queue-head" id="queue-head">
            {queued === 1 ? '1 message waits' : `${queued} messages wait`} to be sent when the agent finishes
            {props.canCancel ? (
              <button type="button" class="small warn" onClick={() => props.cancelAndSend()}>
                Cancel and send now
              </button>
            ) : null}
          </p>
          <ol class="queue-list" aria-labelledby="queue-head">
            {props.queue.map((q, i) => (
              <li key={q.id} class="queued">
                <span class="queued-text">
                  {q.text || '(images only)'}
                  {q.images.length ? ` · ${q.images.length} image${q.images.length === 1 ? '' : 's'}` : ''}
                </span>
                <button type="button" class="small" aria-label={`Remove queued message ${i + 1}`} onClick={() => props.unqueue(q.id)}>
                  Remove
                </button>
              </li>
            ))}
          </ol>
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
              void submit();
            }
          }}
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
          <button type="submit" class="primary" disabled={sending} title={props.busy ? 'Queue this message (Enter)' : 'Send (Enter)'}>
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
