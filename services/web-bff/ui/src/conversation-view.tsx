/**
 * One conversation: header, mode line, live state line, context figure, the transcript (each
 * message at rest can be forked from), the upgrade dialog, the messages waiting and the composer. Everything shown follows the watch stream
 * (session.ts); the buttons only send requests and the stream reports their effect. Until the
 * first snapshot it says it is loading; an unknown conversation gets one not-found page.
 *
 * Keys: Esc cancels the running turn (when no dialog or menu is open), `/` focuses the message box.
 */
import { isFinished, Mode, StateKind, ThinkingLevel, type Conversation, type ServerTool } from '@bedrock/contracts';
import {
  SERVER_TOOLS,
  serverToolLabel,
  serverToolName,
  settingsSummary,
  THINKING_CHOICES,
  thinkingLabel,
} from '@bedrock/agent-view/agent-content';
import { modeLine, stateLine, stateShort, usageView, writePlace, writeWarning } from '@bedrock/agent-view/format';
import { retrying } from '@bedrock/agent-view/retry';
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { errorText, isUnauthenticated } from './api.ts';
import { Composer, PendingList } from './composer.tsx';
import { perFrame } from './frame.ts';
import { Session, type SessionDeps } from './session.ts';
import { conversationTitle } from './titles.ts';
import { ForkContext, SubAgentNamesContext, Transcript } from './transcript.tsx';
import { createRewinder, RewindContext } from './rewind.tsx';
import { McpToggles } from './mcp-servers.tsx';

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

/**
 * Deletes the conversation (DeleteConversation: its messages and its sub-agents, for good) after
 * a question; Keep is the default (and Esc). A busy conversation is refused by the service, which
 * says to cancel first: its words are shown in the alert.
 */
/** A bin, drawn rather than an emoji: a host without an emoji font showed an empty box. */
function TrashIcon() {
  return (
    <svg class="icon" aria-hidden="true" width="14" height="14" viewBox="0 0 16 16" fill="none" stroke="currentColor" stroke-width="1.5">
      <path d="M2.5 4h11M6 4V2.5h4V4M4 4l.7 9.5h6.6L12 4M6.5 6.5v5M9.5 6.5v5" />
    </svg>
  );
}

function DeleteConversation({ session }: { session: Session }) {
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

/** The upgrade question: a modal dialog once per request; after Escape a banner reopens it. */
function UpgradeDialog({ session, awaiting }: { session: Session; awaiting: boolean }) {
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

/**
 * Thinking, web tools and MCP servers: the summary, and a panel that changes them (the MCP
 * switches apply at once, each its own call). Only what was changed is
 * sent (an unchanged tool list is left out, so a tool the deployment no longer allows does not
 * block a change of thinking); the server's refusal is shown in the panel as it says it.
 */
function SettingsPanel({ session, conversation: c }: { session: Session; conversation: Conversation }) {
  const panel = useRef<HTMLDetailsElement>(null);
  const thinking = useRef<HTMLSelectElement>(null);
  const boxes = useRef(new Map<ServerTool, HTMLInputElement>());
  const [error, setError] = useState('');
  const [saving, setSaving] = useState(false);
  // The MCP switches load when the panel opens (the list may have changed since).
  const [open, setOpen] = useState(false);
  const summary = settingsSummary(c.thinking, c.serverTools);

  const save = async () => {
    const level = Number(thinking.current?.value) as ThinkingLevel;
    const tools = SERVER_TOOLS.filter((t) => boxes.current.get(t)?.checked);
    const toolsChanged = tools.length !== c.serverTools.length || tools.some((t) => !c.serverTools.includes(t));
    const changedLevel = level === c.thinking ? ThinkingLevel.UNSPECIFIED : level;
    if (changedLevel === ThinkingLevel.UNSPECIFIED && !toolsChanged) {
      if (panel.current) panel.current.open = false;
      return;
    }
    setError('');
    setSaving(true);
    try {
      // Settings are set, not added to: sending the same change again is harmless.
      const res = await retrying(
        () =>
          session.api.updateConversationSettings({
            conversationId: c.id,
            thinking: changedLevel,
            ...(toolsChanged ? { serverTools: { tools } } : {}),
          }),
        { onRetry: ({ attempt, attempts, error }) => setError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`) },
      );
      if (panel.current) panel.current.open = false;
      session.settingsChanged(res.conversation);
    } catch (err) {
      if (isUnauthenticated(err)) return session.authFailed(errorText(err));
      setError(errorText(err));
    } finally {
      setSaving(false);
    }
  };

  return (
    <details class="settings" ref={panel} onToggle={() => setOpen(Boolean(panel.current?.open))}>
      <summary title="Change thinking, web tools and MCP servers">{summary}</summary>
      <form
        class="settings-form"
        aria-label="Conversation settings"
        onSubmit={(ev) => {
          ev.preventDefault();
          void save();
        }}
      >
        <label for="conv-thinking">Thinking</label>
        <select id="conv-thinking" name="thinking" ref={thinking}>
          {/* "Default" only stands for an old conversation stored without a level; changing sets one. */}
          {THINKING_CHOICES.filter((l) => l !== ThinkingLevel.UNSPECIFIED || c.thinking === ThinkingLevel.UNSPECIFIED).map((level) => (
            <option key={level} value={String(level)} selected={level === c.thinking} disabled={level === ThinkingLevel.UNSPECIFIED}>
              {thinkingLabel(level)}
            </option>
          ))}
        </select>
        <fieldset class="checks">
          <legend>Web tools</legend>
          {SERVER_TOOLS.map((tool) => (
            <label class="check" for={`conv-${serverToolName(tool)}`} key={tool}>
              <input
                type="checkbox"
                id={`conv-${serverToolName(tool)}`}
                defaultChecked={c.serverTools.includes(tool)}
                ref={(el) => {
                  if (el) boxes.current.set(tool, el);
                }}
              />
              {serverToolLabel(tool)}
            </label>
          ))}
        </fieldset>
        {session.mcp && open ? (
          <McpToggles mcp={session.mcp} conversationId={c.id} authFailed={(message) => session.authFailed(message)} />
        ) : null}
        {error ? (
          <p class="form-error" role="alert">
            {error}
          </p>
        ) : null}
        <div class="settings-buttons">
          <button type="submit" class="small primary" disabled={saving}>
            Save
          </button>
          <button
            type="button"
            class="small"
            onClick={() => {
              if (panel.current) panel.current.open = false;
            }}
          >
            Close
          </button>
        </div>
      </form>
    </details>
  );
}
