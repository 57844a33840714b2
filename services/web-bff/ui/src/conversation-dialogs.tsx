/** The conversation's two dialogs: deleting it, and the agent's request for Unrestricted mode. */
import { writePlace, writeWarning } from '@bedrock/agent-view/format';
import { useEffect, useRef, useState } from 'preact/hooks';
import type { Session } from './session.ts';

/** A bin, drawn rather than an emoji: a host without an emoji font showed an empty box. */
function TrashIcon() {
  return (
    <svg class="icon" aria-hidden="true" width="14" height="14" viewBox="0 0 16 16" fill="none" stroke="currentColor" stroke-width="1.5">
      <path d="M2.5 4h11M6 4V2.5h4V4M4 4l.7 9.5h6.6L12 4M6.5 6.5v5M9.5 6.5v5" />
    </svg>
  );
}

/**
 * Deletes the conversation (DeleteConversation: its messages and its sub-agents, for good) after
 * a question; Keep is the default (and Esc). A busy conversation is refused by the service, which
 * says to cancel first: its words are shown in the alert.
 */
export function DeleteConversation({ session }: { session: Session }) {
  const dialog = useRef<HTMLDialogElement>(null);
  const [deleting, setDeleting] = useState(false);
  const remove = async () => {
    dialog.current?.close();
    setDeleting(true);
    const ok = await session.deleteConversation();
    if (!ok) setDeleting(false);
  };
  return (
    <>
      <button
        type="button"
        class="small delete-button"
        disabled={deleting}
        aria-label="Delete this conversation"
        title="Delete this conversation"
        onClick={() => dialog.current?.showModal()}
      >
        {deleting ? '…' : <TrashIcon />}
        <span class="delete-word">{deleting ? ' Deleting' : ' Delete'}</span>
      </button>
      <dialog class="delete-dialog" aria-labelledby="delete-title" aria-describedby="delete-desc" ref={dialog}>
        <h2 id="delete-title">Delete this conversation?</h2>
        <p id="delete-desc">Its messages and its sub-agents are deleted for good; this cannot be undone.</p>
        <div class="dialog-buttons">
          <button type="button" class="secondary" autofocus onClick={() => dialog.current?.close()}>
            Keep it
          </button>
          <button type="button" class="danger" onClick={() => void remove()}>
            Delete
          </button>
        </div>
      </dialog>
    </>
  );
}

/** The upgrade question: a modal dialog once per request; after Escape a banner reopens it. */
export function UpgradeDialog({ session, awaiting }: { session: Session; awaiting: boolean }) {
  const c = session.conversation!;
  const dialog = useRef<HTMLDialogElement>(null);
  const asked = useRef(false);
  const [open, setOpen] = useState(false);
  useEffect(() => {
    const d = dialog.current;
    if (!d) return;
    if (awaiting && !asked.current && !d.open) {
      asked.current = true;
      d.showModal();
      setOpen(true);
    }
    if (!awaiting) {
      asked.current = false;
      if (d.open) d.close();
    }
  });
  const reason = session.upgradeReason || session.state?.upgradeReason || '';
  const warning = writeWarning({ workspaceName: c.workspaceName, cwd: c.cwd, access: c.writeAccess });
  const respond = (approve: boolean) => {
    dialog.current?.close();
    void session.respond(approve);
  };
  return (
    <>
      {awaiting && !open ? (
        <div class="upgrade-banner">
          <span>The agent is waiting for your answer to its request for Unrestricted mode.</span>
          <button
            type="button"
            class="small primary"
            onClick={() => {
              dialog.current?.showModal();
              setOpen(true);
            }}
          >
            Review request
          </button>
        </div>
      ) : null}
      <dialog
        class="upgrade-dialog"
        aria-labelledby="upgrade-title"
        aria-describedby="upgrade-desc"
        ref={dialog}
        onClose={() => setOpen(false)}
      >
        <h2 id="upgrade-title">Allow Unrestricted mode?</h2>
        <p id="upgrade-desc">
          The agent asks to leave the read-only sandbox so it can write files in{' '}
          {writePlace({ workspaceName: c.workspaceName, cwd: c.cwd, access: c.writeAccess })} and use the network. Its reason:
        </p>
        <blockquote class="upgrade-reason">{reason || '(no reason given)'}</blockquote>
        {warning ? (
          <p class="upgrade-warning" role="alert" data-testid="upgrade-write-warning">
            ⚠ {warning}
          </p>
        ) : null}
        <div class="dialog-buttons">
          <button type="button" class="secondary" autofocus onClick={() => respond(false)}>
            Deny
          </button>
          <button type="button" class="primary" onClick={() => respond(true)}>
            Approve
          </button>
        </div>
      </dialog>
    </>
  );
}
