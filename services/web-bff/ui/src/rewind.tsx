/**
 * "Rewind to here" (docs/web-ui.md, "Rewind to here"): on a message at rest, a panel that first
 * shows what rewinding the files would undo (GetWorkspaceDiff from the message to now), then offers
 * the files, the chat or both (RewindConversation, one request id for every attempt) and says what
 * was done. The service's refusals are shown as it words them.
 */
import { createContext, type ComponentChildren } from 'preact';
import { useContext, useEffect, useRef, useState } from 'preact/hooks';
import { Code, ConnectError } from '@connectrpc/connect';
import {
  FileChangeKind,
  RewindScope,
  type FileChange,
  type GetWorkspaceDiffResponse,
  type RewindConversationResponse,
} from '@bedrock/contracts';
import { retrying } from '@bedrock/agent-view/retry';
import { createCheckpointApi, errorText, type CheckpointApi } from './api.ts';

/** The conversation's checkpoint calls, for the transcript's messages; undefined where rewinding is not offered. */
export interface Rewinder {
  diff(at: bigint): Promise<GetWorkspaceDiffResponse>;
  rewind(at: bigint, scope: RewindScope): Promise<RewindConversationResponse>;
}

export const RewindContext = createContext<Rewinder | undefined>(undefined);

export function createRewinder(conversationId: string, api: CheckpointApi = createCheckpointApi()): Rewinder {
  return {
    diff: (at) => api.getWorkspaceDiff({ conversationId, from: at, to: 0n }),
    // One request id for every attempt: a retry answers what the first attempt did.
    rewind: (at, scope) => retrying((requestId) => api.rewindConversation({ conversationId, atMessage: at, scope, requestId })),
  };
}

const KIND_LABELS: Record<number, string> = {
  [FileChangeKind.ADDED]: 'added',
  [FileChangeKind.MODIFIED]: 'modified',
  [FileChangeKind.DELETED]: 'deleted',
  [FileChangeKind.MODE]: 'mode changed',
  [FileChangeKind.SYMLINK]: 'link changed',
};

type DiffState =
  | { readonly kind: 'loading' }
  | { readonly kind: 'shown'; readonly changes: readonly FileChange[]; readonly complete: boolean }
  /** The files cannot be rewound to this point (`why`, the service's words); the chat still can. */
  | { readonly kind: 'no-files'; readonly why: string }
  | { readonly kind: 'failed'; readonly message: string };

type Panel =
  | { readonly kind: 'closed' }
  | { readonly kind: 'open'; readonly diff: DiffState; readonly working?: RewindScope; readonly result?: string; readonly error?: string };

const SCOPES: readonly { scope: RewindScope; label: string; files: boolean }[] = [
  { scope: RewindScope.FILES, label: 'Files only', files: true },
  { scope: RewindScope.HISTORY, label: 'Chat only', files: false },
  { scope: RewindScope.BOTH, label: 'Files and chat', files: true },
];

function resultText(scope: RewindScope, at: bigint, res: RewindConversationResponse): string {
  const files =
    scope === RewindScope.HISTORY
      ? ''
      : res.filesFromTurn > 0n
        ? `The files are back as they were at message ${at} (from the checkpoint before message ${res.filesFromTurn}).`
        : 'The files were left as they are: nothing changed them since this message.';
  const chat =
    scope === RewindScope.FILES
      ? ''
      : `${res.messagesRemoved} message${res.messagesRemoved === 1 ? '' : 's'} after this one removed from the chat.`;
  return ['Rewound.', files, chat].filter(Boolean).join(' ');
}

/**
 * The "Rewind to here" button for a message's head line (`at`: the last message kept), and its
 * panel under the message. Refusals show in the service's words: busy, not a place a history can
 * end, and storage that cannot checkpoint (FAILED_PRECONDITION: the files cannot be rewound, the
 * chat still can). The messages after the cut leave the transcript through the watch stream's
 * `history_rewound` event, as they do in every other tab.
 */
export function useRewindAction(at: bigint | undefined): { button: ComponentChildren; panel: ComponentChildren } {
  const rewinder = useContext(RewindContext);
  const [panel, setPanel] = useState<Panel>({ kind: 'closed' });
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  if (!rewinder || at === undefined) return { button: null, panel: null };
  const update = (next: (p: Panel) => Panel) => {
    if (mounted.current) setPanel(next);
  };
  const readDiff = async () => {
    let diff: DiffState;
    try {
      const res = await rewinder.diff(at);
      diff = { kind: 'shown', changes: res.changes, complete: res.complete };
    } catch (err) {
      diff =
        ConnectError.from(err).code === Code.FailedPrecondition
          ? { kind: 'no-files', why: errorText(err) }
          : { kind: 'failed', message: errorText(err) };
    }
    update((p) => (p.kind === 'open' ? { ...p, diff } : p));
  };
  const open = async () => {
    setPanel({ kind: 'open', diff: { kind: 'loading' } });
    await readDiff();
  };
  const run = async (scope: RewindScope) => {
    update((p) => (p.kind === 'open' ? { ...p, working: scope, result: undefined, error: undefined } : p));
    try {
      const res = await rewinder.rewind(at, scope);
      update((p) => (p.kind === 'open' ? { ...p, working: undefined, result: resultText(scope, at, res) } : p));
      // The files moved: what a rewind would undo now (nothing, right after one).
      if (scope !== RewindScope.HISTORY) await readDiff();
    } catch (err) {
      update((p) => (p.kind === 'open' ? { ...p, working: undefined, error: errorText(err) } : p));
    }
  };
  const id = `rewind-${at}`;
  const isOpen = panel.kind === 'open';
  const button = (
    <button
      type="button"
      class="rewind-button small"
      aria-expanded={isOpen ? 'true' : 'false'}
      aria-controls={isOpen ? id : undefined}
      title="Put the files, the chat or both back as they were after this message"
      onClick={() => (isOpen ? setPanel({ kind: 'closed' }) : void open())}
    >
      Rewind to here
    </button>
  );
  if (panel.kind === 'closed') return { button, panel: null };
  const d = panel.diff;
  const filesOff = d.kind === 'no-files' || d.kind === 'loading';
  return {
    button,
    panel: (
      <div class="rewind-panel" id={id} role="region" aria-label={`Rewind to message ${at}`} data-testid="rewind-panel">
        {d.kind === 'loading' ? <p class="rewind-note">Reading what a rewind of the files would undo…</p> : null}
        {d.kind === 'shown' && d.changes.length === 0 ? (
          <p class="rewind-note">No file changed since this message: rewinding the files changes nothing.</p>
        ) : null}
        {d.kind === 'shown' && d.changes.length > 0 ? (
          <>
            <p class="rewind-note">Rewinding the files undoes these changes made since this message:</p>
            <ul class="rewind-changes" aria-label="Changes a rewind of the files undoes">
              {d.changes.map((c) => (
                <li key={c.path} data-kind={KIND_LABELS[c.kind] ?? 'changed'}>
                  <code>{c.path}</code> <span class="rewind-kind">{KIND_LABELS[c.kind] ?? 'changed'}</span>
                  {c.unifiedDiff ? (
                    <details>
                      <summary>Diff</summary>
                      <pre class="rewind-diff">{c.unifiedDiff}</pre>
                    </details>
                  ) : null}
                </li>
              ))}
            </ul>
            {d.complete ? null : <p class="rewind-note">Only the first 10,000 changes are listed.</p>}
          </>
        ) : null}
        {d.kind === 'no-files' ? (
          <p class="form-error rewind-no-files" role="alert">
            The files cannot be rewound: {d.why}
          </p>
        ) : null}
        {d.kind === 'failed' ? (
          <p class="form-error" role="alert">
            What a rewind would undo could not be read: {d.message}
          </p>
        ) : null}
        <p class="rewind-note">The chat: the messages after this one are removed, here and wherever the conversation is open.</p>
        <div class="rewind-choices">
          {SCOPES.map((s) => (
            <button
              key={s.scope}
              type="button"
              class="small"
              disabled={panel.working !== undefined || (s.files && filesOff)}
              onClick={() => void run(s.scope)}
            >
              {panel.working === s.scope ? 'Rewinding…' : s.label}
            </button>
          ))}
          <button type="button" class="small" disabled={panel.working !== undefined} onClick={() => setPanel({ kind: 'closed' })}>
            Close
          </button>
        </div>
        {panel.result ? (
          <p class="rewind-result" role="status">
            {panel.result}
          </p>
        ) : null}
        {panel.error ? (
          <p class="form-error rewind-error" role="alert">
            {panel.error}
          </p>
        ) : null}
      </div>
    ),
  };
}
