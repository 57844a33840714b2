/**
 * One conversation: header, mode and state lines, context figure, the transcript (each message at
 * rest can be forked from), its dialogs, the messages waiting and the composer. Everything shown
 * follows the watch stream (session.ts); the buttons only send requests. Keys: Esc cancels the
 * running turn (no dialog or menu open), `/` focuses the message box.
 */
import { isFinished, Mode, StateKind } from '@bedrock/contracts';
import { settingsSummary } from '@bedrock/agent-view/agent-content';
import { modeLine, stateLine, stateShort, usageView } from '@bedrock/agent-view/format';
import { retrying } from '@bedrock/agent-view/retry';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { errorText, isUnauthenticated } from './api.ts';
import { Composer, PendingList } from './composer.tsx';
import { perFrame } from './frame.ts';
import type { SessionDeps } from './session-state.ts';
import { Session } from './session.ts';
import { conversationTitle } from './titles.ts';
import { ForkContext, SubAgentNamesContext, Transcript } from './transcript.tsx';
import { createRewinder, RewindContext } from './rewind.tsx';
import { DeleteConversation, UpgradeDialog } from './conversation-dialogs.tsx';
import { SettingsPanel } from './settings-panel.tsx';

export function ConversationView({ deps, id }: { deps: SessionDeps; id: string }) {
  const session = useMemo(() => new Session(deps, id), [id]);
  const [, setVersion] = useState(0);
  const focusComposer = useRef<() => void>(() => {});
  useEffect(() => {
    const draw = perFrame(() => setVersion((v) => v + 1));
    session.changed = draw.request;
    session.start();
    return () => {
      draw.cancel();
      session.dispose();
    };
  }, [session]);

  useEffect(() => {
    const onKey = (ev: KeyboardEvent) => {
      if (ev.defaultPrevented || ev.isComposing) return;
      if (document.querySelector('dialog[open], .drawer-open')) return;
      const target = ev.target as HTMLElement | null;
      const typing = target?.closest('input, textarea, select, [contenteditable="true"]');
      if (ev.key === 'Escape') {
        // Esc first closes an open menu (the settings panel); then it cancels the turn.
        const menu = document.querySelector<HTMLDetailsElement>('details.settings[open]');
        if (menu) {
          menu.open = false;
          menu.querySelector('summary')?.focus();
          ev.preventDefault();
          return;
        }
        if (session.canCancel) {
          ev.preventDefault();
          session.cancel();
        }
        return;
      }
      if (ev.key === '/' && !typing && !ev.ctrlKey && !ev.metaKey && !ev.altKey) {
        ev.preventDefault();
        focusComposer.current();
      }
    };
    document.addEventListener('keydown', onKey);
    return () => document.removeEventListener('keydown', onKey);
  }, [session]);

  const phase = session.phase;
  if (phase.kind === 'not-found') return <NotFound id={id} />;
  if (phase.kind === 'unavailable')
    return (
      <div class="page-message" role="alert">
        <h1>Conversation unavailable</h1>
        <p>{phase.message}</p>
        <p>
          <a href="/" data-link>
            Back to the start page
          </a>
        </p>
      </div>
    );
  if (phase.kind === 'loading' || !session.conversation)
    return (
      <div class="page-message" aria-busy="true">
        <p class="loading">Loading the conversation…</p>
      </div>
    );
  return <Live session={session} focusComposer={focusComposer} />;
}

function NotFound({ id }: { id: string }) {
  useEffect(() => {
    document.title = 'Not found · Bedrock';
  }, []);
  return (
    <div class="page-message not-found" data-testid="not-found">
      <h1>Conversation not found</h1>
      <p>
        There is no conversation <code>{id}</code> that you can open. It may have been typed wrong, or it belongs to someone else.
      </p>
      <p>
        <a href="/" data-link>
          Back to the start page
        </a>
      </p>
    </div>
  );
}

function Live({ session, focusComposer }: { session: Session; focusComposer: { current: () => void } }) {
  const c = session.conversation!;
  const kind = session.kind;
  const now = performance.now();
  const title = conversationTitle(c);
  useEffect(() => {
    document.title = `${title} · Bedrock`;
  }, [title]);

  const sandbox = c.sandboxAvailable;
  const m = modeLine(session.mode, sandbox, { workspaceName: c.workspaceName, cwd: c.cwd, access: c.writeAccess });
  const canDowngrade = sandbox && session.mode === Mode.UNRESTRICTED && !isFinished(kind);
  // The state line says what is known: while the watch reconnects, the last state may be stale.
  const line = session.connected ? stateLine(session.state, session.retry, now) : { text: 'Reconnecting…', tone: 'attention' as const };
  const u = usageView(session.contextUsage);
  const offerContinuation = u.warning && (kind === StateKind.IDLE || kind === StateKind.ERROR);
  const exhausted = kind === StateKind.CONTEXT_EXHAUSTED;
  const canChange = !isFinished(kind);
  const awaiting = kind === StateKind.AWAITING_MODE_APPROVAL;
  const titles = session.subAgentTitles;
  const names = useMemo(() => ({ parentId: c.id, titles }), [c.id, titles]);
  // Sub-agents are driven by their parent: the service refuses to fork one, so they offer no fork.
  const fork = useMemo(
    () => (c.parentId ? undefined : (at: bigint, withFiles: boolean) => session.fork(at, withFiles)),
    [session, c.parentId],
  );
  // Rewinding too: a sub-agent's history is its parent's to decide.
  const rewinder = useMemo(() => (c.parentId ? undefined : createRewinder(c.id)), [c.id, c.parentId]);
  const forkedFrom = c.forkedFrom;

  return (
    <div class="conversation">
      <header class="conv-header">
        <div class="conv-heading">
          <ConversationTitle key={c.id} session={session} title={title} untitled={!c.title.trim()} />
          <p class="conv-meta">
            {c.parentId ? (
              <>
                {'Sub-agent of '}
                <a href={`/c/${encodeURIComponent(c.parentId)}`} data-link class="parent-link" data-testid="parent-link">
                  {session.parentTitle || 'its parent'}
                </a>
                {' · '}
              </>
            ) : null}
            {forkedFrom ? (
              <>
                {'Forked from '}
                <a
                  href={`/c/${encodeURIComponent(forkedFrom.conversationId)}`}
                  data-link
                  class="fork-source-link"
                  data-testid="fork-source-link"
                  title={`Its history up to message ${forkedFrom.messageSequence} was copied from there`}
                >
                  {session.forkSourceTitle || 'the conversation it came from'}
                </a>
                {' · '}
              </>
            ) : null}
            {c.workspaceName ? (
              <>
                <span class="workspace-name" title="Workspace" data-testid="workspace-name">
                  {c.workspaceName}
                </span>
                {' · '}
              </>
            ) : null}
            <code title="Working directory">{c.cwd}</code> · <span title="Model">{c.model}</span>
            {c.continuedFromId ? (
              <>
                {' · continued from '}
                <a href={`/c/${c.continuedFromId}`} data-link>
                  the earlier conversation
                </a>
              </>
            ) : null}
          </p>
        </div>
        <div class="status-bar">
          <div class="mode-line" data-testid="mode-line">
            <span class={`mode-badge mode-${m.tone}`}>{m.label}</span>
            <span class="mode-detail">{m.detail}</span>
            {m.warning ? (
              <span class="mode-warning" data-testid="write-warning" title={m.warning}>
                ⚠ <span class="wide-only">{c.writeAccess?.toolUser || 'The tool user'} cannot write here</span>
                <span class="narrow-only">not writable</span>
              </span>
            ) : null}
            {canDowngrade ? (
              <button type="button" class="small" onClick={() => session.downgrade()} aria-label="Switch to Restricted">
                <span class="wide-only">Switch to </span>Restricted
              </button>
            ) : null}
          </div>
          {session.subAgents.length ? <SubAgents session={session} /> : null}
          <div class="settings-line" data-testid="settings">
            {canChange ? (
              <SettingsPanel key={`${c.thinking}|${c.serverTools.join(',')}`} session={session} conversation={c} />
            ) : (
              <span class="settings-summary">{settingsSummary(c.thinking, c.serverTools)}</span>
            )}
          </div>
          <div
            class="state-line"
            role="status"
            aria-live="polite"
            data-testid="state-line"
            data-tone={line.tone}
            data-state={StateKind[kind] ?? String(kind)}
          >
            <span class="state-dot" aria-hidden="true" />
            <span class="state-text" title={kind === StateKind.ERROR ? session.state?.errorMessage : line.text}>
              {line.text}
            </span>
          </div>
          <Usage view={u} offerContinuation={offerContinuation} onContinue={() => session.summariseAndContinue()} />
          {c.parentId ? null : <DeleteConversation session={session} />}
        </div>
      </header>
      {session.connected ? null : (
        <div class="connection" role="status">
          Connection lost: reconnecting…
        </div>
      )}
      <UpgradeDialog session={session} awaiting={awaiting} />
      <SubAgentNamesContext.Provider value={names}>
        <ForkContext.Provider value={fork}>
          <RewindContext.Provider value={rewinder}>
            <Transcript model={session.transcript} version={session.transcript.version} pin={session.sent} />
          </RewindContext.Provider>
        </ForkContext.Provider>
      </SubAgentNamesContext.Provider>
      {session.alert ? (
        <div class="alert" role="alert">
          <span>{session.alert}</span>
          <button type="button" class="link" aria-label="Dismiss error" onClick={() => session.dismissError()}>
            Dismiss
          </button>
        </div>
      ) : null}
      {exhausted ? (
        <div class="exhausted">
          <p>
            The context window is full, so this conversation is read-only. Continue the work in a new conversation seeded with the summary
            above.
          </p>
          {session.pending.length ? <PendingList pending={session.pending} readOnly /> : null}
          <button type="button" class="primary" onClick={() => void session.continueFrom()}>
            Start a new conversation from this
          </button>
        </div>
      ) : null}
      {session.acceptsMessages ? (
        <Composer
          busy={kind !== StateKind.IDLE && kind !== StateKind.ERROR}
          canCancel={session.canCancel}
          hint={session.busyHint}
          pending={session.pending}
          submit={(text, images, delivery) => session.submit(text, images, delivery)}
          cancel={() => session.cancel()}
          cancelAndSendWaiting={() => session.cancelAndSendWaiting()}
          unqueue={(id) => session.unqueue(id)}
          problem={(message) => session.showError(message)}
          focusRef={(focus) => (focusComposer.current = focus)}
        />
      ) : null}
    </div>
  );
}

/**
 * The title, renamable in place: a click on it, or the ✎ button (Enter or Space), opens a field;
 * Enter saves, Esc cancels. The service's refusal (empty, too long, not one line) is shown under
 * the field as it says it, and the field stays open.
 */
function ConversationTitle({ session, title, untitled }: { session: Session; title: string; untitled: boolean }) {
  const c = session.conversation!;
  const [editing, setEditing] = useState(false);
  const [error, setError] = useState('');
  const [saving, setSaving] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const editButton = useRef<HTMLButtonElement>(null);
  const wasEditing = useRef(false);
  // A layout effect, so focus moves with the render (an effect waits for an animation frame,
  // which a page in the background may not get for a while).
  useLayoutEffect(() => {
    if (editing) {
      input.current?.focus();
      input.current?.select();
    } else if (wasEditing.current) editButton.current?.focus();
    wasEditing.current = editing;
  }, [editing]);

  const open = () => {
    setError('');
    setEditing(true);
  };
  const cancel = () => {
    setError('');
    setEditing(false);
  };
  const save = async () => {
    const typed = input.current?.value ?? '';
    if (typed.trim() === c.title && typed.trim()) return cancel();
    setError('');
    setSaving(true);
    try {
      // A rename sets the title: sending it again is harmless.
      const res = await retrying(() => session.api.renameConversation({ conversationId: c.id, title: typed }), {
        onRetry: ({ attempt, attempts, error }) => setError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`),
      });
      session.renamed(res.conversation);
      setEditing(false);
    } catch (err) {
      if (isUnauthenticated(err)) return session.authFailed(errorText(err));
      setError(errorText(err));
      input.current?.focus();
    } finally {
      setSaving(false);
    }
  };

  if (editing)
    return (
      <form
        class="rename-form"
        aria-label="Rename the conversation"
        onSubmit={(ev) => {
          ev.preventDefault();
          void save();
        }}
      >
        <input
          id="conv-title-input"
          class="rename-input"
          ref={input}
          aria-label="Conversation title"
          aria-invalid={error ? 'true' : undefined}
          aria-describedby={error ? 'rename-error' : undefined}
          defaultValue={c.title}
          placeholder="Name this conversation"
          autocomplete="off"
          onKeyDown={(ev) => {
            if (ev.key === 'Escape') {
              // The field takes Esc: it does not cancel the agent's turn.
              ev.preventDefault();
              ev.stopPropagation();
              cancel();
            }
          }}
        />
        <button type="submit" class="small primary" disabled={saving}>
          Save
        </button>
        <button type="button" class="small" onClick={cancel}>
          Cancel
        </button>
        {error ? (
          <p class="form-error rename-error" id="rename-error" role="alert">
            {error}
          </p>
        ) : null}
      </form>
    );
  return (
    <div class="title-row">
      <h1 class={`conv-title${untitled ? ' untitled' : ''}`} onClick={open} title="Click to rename">
        {title}
      </h1>
      <button type="button" class="rename-button icon-button small" aria-label="Rename conversation" ref={editButton} onClick={open}>
        <span aria-hidden="true">✎</span>
      </button>
    </div>
  );
}

/** The conversation's sub-agents: a menu of links to their transcripts, with their states. */
function SubAgents({ session }: { session: Session }) {
  const agents = session.subAgents;
  const menu = useRef<HTMLDetailsElement>(null);
  return (
    <details class="settings subagents" ref={menu} data-testid="sub-agents">
      <summary title="Open a sub-agent's transcript">{agents.length === 1 ? '1 sub-agent' : `${agents.length} sub-agents`}</summary>
      <ul class="settings-form subagent-menu" aria-label="Sub-agents">
        {agents.map((a) => (
          <li key={a.id}>
            <a
              href={`/c/${encodeURIComponent(a.id)}`}
              data-link
              onClick={() => {
                if (menu.current) menu.current.open = false;
              }}
            >
              {a.title}
            </a>
            <span class="subagent-state">{stateShort(a.kind)}</span>
          </li>
        ))}
      </ul>
    </details>
  );
}

function Usage({
  view: u,
  offerContinuation,
  onContinue,
}: {
  view: ReturnType<typeof usageView>;
  offerContinuation: boolean;
  onContinue: () => void;
}) {
  const fill = useRef<HTMLDivElement>(null);
  // Through CSSOM, which the page's Content-Security-Policy allows (a style attribute it blocks).
  useLayoutEffect(() => {
    if (fill.current) fill.current.style.width = `${(u.fraction * 100).toFixed(1)}%`;
  }, [u.fraction]);
  const pct = Math.round(u.fraction * 100);
  return (
    <div class={`usage${u.warning ? ' usage-warning' : ''}`} data-testid="context-usage">
      <span class="usage-label">{u.warning ? `Context ${u.text}: nearly full` : `Context ${u.text}`}</span>
      <div
        class="usage-bar"
        role="meter"
        aria-label="Context window used"
        aria-valuemin={0}
        aria-valuemax={100}
        aria-valuenow={pct}
        aria-valuetext={u.text}
        data-percent={pct}
      >
        <div class="usage-fill" ref={fill} />
      </div>
      {offerContinuation ? (
        <button type="button" class="small warn" onClick={onContinue}>
          Summarise and continue
        </button>
      ) : null}
    </div>
  );
}
