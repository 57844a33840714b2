/**
 * One conversation: header, mode line, live state line, context usage, the transcript, the
 * upgrade dialog and the composer. Everything shown follows the watch stream; the buttons
 * only send requests and the stream reports their effect.
 */
import {
  isFinished,
  Mode,
  StateKind,
  ThinkingLevel,
  type ContextUsage,
  type Conversation,
  type ConversationEvent,
  type ConversationState,
  type ServerTool,
} from '@bedrock/contracts';
import {
  SERVER_TOOLS,
  serverToolLabel,
  serverToolName,
  settingsSummary,
  THINKING_CHOICES,
  thinkingLabel,
} from '@bedrock/agent-view/agent-content';
import { errorText, isUnauthenticated, type Api } from './api.ts';
import { Composer } from './composer.ts';
import { h, replace } from './dom.ts';
import { canCancel, errorKindLabel, isBusy, modeLine, stateLine, usageView, type PendingRetry } from '@bedrock/agent-view/format';
import { retrying } from '@bedrock/agent-view/retry';
import { Transcript } from './transcript.ts';
import { watch } from './watch.ts';

export interface ViewDeps {
  readonly api: Api;
  /** The token was refused: back to the sign-in form with this message. */
  authFailed(message: string): void;
  /** Something the conversation list shows changed (state, a new conversation). */
  listChanged(): void;
  navigate(path: string): void;
}

export interface View {
  readonly el: HTMLElement;
  dispose(): void;
}

export function conversationView(deps: ViewDeps, id: string): View {
  const { api } = deps;
  let conversation: Conversation | undefined;
  let state: ConversationState | undefined;
  let mode = Mode.UNSPECIFIED;
  let usage: ContextUsage | undefined;
  let retry: PendingRetry | undefined;
  let upgradeReason = '';
  let askedForThisUpgrade = false;
  let connected = true;
  let ticker: number | undefined;
  let lastListedKind: StateKind | undefined;

  const title = h('h1', { class: 'conv-title' }, 'Loading…');
  const meta = h('p', { class: 'conv-meta' });
  const modeEl = h('div', { class: 'mode-line', 'data-testid': 'mode-line' });
  const settingsEl = h('div', { class: 'settings-line', 'data-testid': 'settings' });
  const stateEl = h('div', { class: 'state-line', role: 'status', 'aria-live': 'polite', 'data-testid': 'state-line' });
  const usageEl = h('div', { class: 'usage', 'data-testid': 'context-usage' });
  const alertEl = h('div', { class: 'alert', role: 'alert', hidden: true });
  const connectionEl = h('div', { class: 'connection', role: 'status', hidden: true }, 'Connection lost: reconnecting…');
  const upgradeBanner = h(
    'div',
    { class: 'upgrade-banner', hidden: true },
    h('span', {}, 'The agent is waiting for your answer to its request for Unrestricted mode.'),
    h('button', { type: 'button', class: 'small primary', onclick: () => dialog.showModal() }, 'Review request'),
  );
  const exhaustedPanel = h(
    'div',
    { class: 'exhausted', hidden: true },
    h(
      'p',
      {},
      'The context window is full, so this conversation is read-only. Continue the work in a new conversation seeded with the summary above.',
    ),
    h('button', { type: 'button', class: 'primary', onclick: () => void continueFrom() }, 'Start a new conversation from this'),
  );

  const transcript = new Transcript();
  const composer = new Composer({
    send: (text, images) => act((requestId) => api.sendMessage({ conversationId: id, text, images, requestId })),
    cancel: () => void act((requestId) => api.cancel({ conversationId: id, requestId })),
    problem: (message) => showError(message),
  });

  const dialogReason = h('blockquote', { class: 'upgrade-reason' });
  const dialog = h(
    'dialog',
    { class: 'upgrade-dialog', 'aria-labelledby': 'upgrade-title', 'aria-describedby': 'upgrade-desc' },
    h('h2', { id: 'upgrade-title' }, 'Allow Unrestricted mode?'),
    h('p', { id: 'upgrade-desc' }, 'The agent asks to leave the read-only sandbox so it can change files and use the network. Its reason:'),
    dialogReason,
    h(
      'div',
      { class: 'dialog-buttons' },
      h('button', { type: 'button', class: 'secondary', onclick: () => void respond(false), autofocus: true }, 'Deny'),
      h('button', { type: 'button', class: 'primary', onclick: () => void respond(true) }, 'Approve'),
    ),
  );
  // Escape closes the dialog without answering; the banner reopens it.
  dialog.addEventListener('close', () => render());

  const el = h(
    'div',
    { class: 'conversation' },
    h(
      'header',
      { class: 'conv-header' },
      h('div', { class: 'conv-heading' }, title, meta),
      h('div', { class: 'status-bar' }, modeEl, settingsEl, stateEl, usageEl),
    ),
    connectionEl,
    upgradeBanner,
    transcript.el,
    alertEl,
    exhaustedPanel,
    composer.el,
    dialog,
  );

  function showError(message: string): void {
    alertEl.hidden = false;
    replace(
      alertEl,
      h('span', {}, message),
      h('button', { type: 'button', class: 'link', 'aria-label': 'Dismiss error', onclick: () => (alertEl.hidden = true) }, 'Dismiss'),
    );
  }

  /**
   * Runs one user action: a fresh request id, and while the server cannot be reached the same
   * request again with the same id (retry.ts), so it is applied once however many tries it takes.
   */
  async function act(fn: (requestId: string) => Promise<unknown>): Promise<boolean> {
    try {
      await retrying(fn, {
        onRetry: ({ attempt, attempts, error }) => showError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`),
      });
      alertEl.hidden = true;
      return true;
    } catch (err) {
      if (isUnauthenticated(err)) deps.authFailed(errorText(err));
      else showError(errorText(err));
      return false;
    }
  }

  /**
   * Thinking and web tools: the summary, and a panel that changes them. Only what was changed
   * is sent (an unchanged tool list is left out, so a tool the deployment no longer allows does
   * not block a change of thinking); the server's refusal is shown in the panel as it says it.
   */
  function renderSettings(c: Conversation, canChange: boolean): void {
    const summary = settingsSummary(c.thinking, c.serverTools);
    if (!canChange) {
      replace(settingsEl, h('span', { class: 'settings-summary' }, summary));
      return;
    }
    const thinking = h(
      'select',
      { id: 'conv-thinking', name: 'thinking' },
      // "Default" only stands for an old conversation stored without a level; changing sets one.
      THINKING_CHOICES.filter((l) => l !== ThinkingLevel.UNSPECIFIED || c.thinking === ThinkingLevel.UNSPECIFIED).map((level) =>
        h(
          'option',
          { value: String(level), selected: level === c.thinking, disabled: level === ThinkingLevel.UNSPECIFIED },
          thinkingLabel(level),
        ),
      ),
    );
    const boxes = SERVER_TOOLS.map((tool) => ({
      tool,
      box: h('input', { type: 'checkbox', id: `conv-${serverToolName(tool)}`, checked: c.serverTools.includes(tool) }),
    }));
    const error = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const save = h('button', { type: 'submit', class: 'small primary' }, 'Save');
    const panel = h('details', { class: 'settings' }, h('summary', { title: 'Change thinking and web tools' }, summary));
    const form = h(
      'form',
      { class: 'settings-form', 'aria-label': 'Conversation settings' },
      h('label', { for: 'conv-thinking' }, 'Thinking'),
      thinking,
      h(
        'fieldset',
        { class: 'checks' },
        h('legend', {}, 'Web tools'),
        boxes.map(({ tool, box }) => h('label', { class: 'check', for: box.id }, box, serverToolLabel(tool))),
      ),
      error,
      h(
        'div',
        { class: 'settings-buttons' },
        save,
        h('button', { type: 'button', class: 'small', onclick: () => (panel.open = false) }, 'Close'),
      ),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const level = Number(thinking.value) as ThinkingLevel;
      const tools: ServerTool[] = boxes.filter(({ box }) => box.checked).map(({ tool }) => tool);
      const toolsChanged = tools.length !== c.serverTools.length || tools.some((t) => !c.serverTools.includes(t));
      void saveSettings(level === c.thinking ? ThinkingLevel.UNSPECIFIED : level, toolsChanged ? tools : undefined, { panel, error, save });
    });
    panel.append(form);
    replace(settingsEl, panel);
  }

  async function saveSettings(
    thinking: ThinkingLevel,
    tools: ServerTool[] | undefined,
    ui: { panel: HTMLDetailsElement; error: HTMLElement; save: HTMLButtonElement },
  ): Promise<void> {
    if (thinking === ThinkingLevel.UNSPECIFIED && tools === undefined) {
      ui.panel.open = false;
      return;
    }
    ui.error.hidden = true;
    ui.save.disabled = true;
    try {
      // Settings are set, not added to: sending the same change again is harmless.
      const res = await retrying(
        () => api.updateConversationSettings({ conversationId: id, thinking, ...(tools ? { serverTools: { tools } } : {}) }),
        {
          onRetry: ({ attempt, attempts, error }) => {
            ui.error.hidden = false;
            ui.error.textContent = `${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`;
          },
        },
      );
      const changed = res.conversation;
      if (conversation && changed) conversation = { ...conversation, thinking: changed.thinking, serverTools: changed.serverTools };
      ui.panel.open = false;
      render();
    } catch (err) {
      if (isUnauthenticated(err)) return deps.authFailed(errorText(err));
      ui.error.hidden = false;
      ui.error.textContent = errorText(err);
    } finally {
      ui.save.disabled = false;
    }
  }

  async function respond(approve: boolean): Promise<void> {
    if (dialog.open) dialog.close();
    await act((requestId) => api.respondToModeUpgrade({ conversationId: id, approve, requestId }));
  }

  async function continueFrom(): Promise<void> {
    if (!conversation) return;
    const from = conversation;
    await act(async (requestId) => {
      const res = await api.createConversation({ cwd: from.cwd, model: from.model, continueFromId: from.id, requestId });
      deps.listChanged();
      if (res.conversation) deps.navigate(`/c/${res.conversation.id}`);
    });
  }

  function onEvent(e: ConversationEvent): void {
    const now = performance.now();
    switch (e.kind.case) {
      case 'snapshot': {
        conversation = e.kind.value.conversation;
        if (conversation) {
          state = conversation.state;
          mode = conversation.mode;
          usage = conversation.contextUsage;
        }
        retry = retryFromState(state, now, retry);
        transcript.reset(e.kind.value.messages);
        break;
      }
      case 'stateChanged': {
        const v = e.kind.value;
        state = v.state;
        if (v.mode !== Mode.UNSPECIFIED) mode = v.mode;
        if (v.contextUsage) usage = v.contextUsage;
        retry = retryFromState(state, now, retry);
        break;
      }
      case 'messagePersisted':
        if (e.kind.value.message) transcript.add(e.kind.value.message);
        break;
      case 'tokenDelta':
        transcript.tokenDelta(e.kind.value);
        break;
      case 'toolOutput':
        transcript.toolOutput(e.kind.value.toolUseId, e.kind.value.text);
        break;
      case 'retryScheduled': {
        const v = e.kind.value;
        retry = {
          attempt: v.attempt,
          maxAttempts: v.maxAttempts,
          at: now + Number(v.delayMs),
          errorKind: v.errorKind,
          errorMessage: v.errorMessage,
        };
        const failed = `Attempt ${v.attempt - 1} of ${v.maxAttempts} failed (${errorKindLabel(v.errorKind)})${v.errorMessage ? `: ${v.errorMessage}` : '.'}`;
        transcript.notice(
          `${failed}\nRetrying: attempt ${v.attempt} of ${v.maxAttempts} in ${Math.ceil(Number(v.delayMs) / 1000)}s.`,
          'warn',
        );
        break;
      }
      case 'modeUpgradeRequested':
        upgradeReason = e.kind.value.reason;
        askedForThisUpgrade = false;
        break;
      case 'modeChanged':
        mode = e.kind.value.mode;
        break;
      case 'contextWarning':
        usage = e.kind.value.contextUsage ?? usage;
        transcript.notice(
          `The context window is ${Math.round(usageView(usage).fraction * 100)}% full. You can summarise this conversation and continue in a new one.`,
          'warn',
        );
        break;
      case 'contextExhausted':
        if (state) state = { ...state, kind: StateKind.CONTEXT_EXHAUSTED, summary: e.kind.value.summary };
        break;
      case 'subAgentProgress':
        transcript.subAgentProgress(e.kind.value);
        break;
      default:
        return;
    }
    render();
  }

  function renderUsage(u: ReturnType<typeof usageView>, offerContinuation: boolean): void {
    usageEl.classList.toggle('usage-warning', u.warning);
    const bar = h('div', {
      class: 'usage-bar',
      role: 'meter',
      'aria-label': 'Context window used',
      'aria-valuemin': 0,
      'aria-valuemax': 100,
      'aria-valuenow': Math.round(u.fraction * 100),
      'aria-valuetext': u.text,
    });
    bar.append(h('div', { class: 'usage-fill', style: `width: ${(u.fraction * 100).toFixed(1)}%` }));
    replace(
      usageEl,
      h('span', { class: 'usage-label' }, u.warning ? `Context ${u.text}: nearly full` : `Context ${u.text}`),
      bar,
      offerContinuation
        ? h(
            'button',
            {
              type: 'button',
              class: 'small warn',
              onclick: () => void act((requestId) => api.triggerContinuation({ conversationId: id, requestId })),
            },
            'Summarise and continue',
          )
        : null,
    );
  }

  function render(): void {
    const now = performance.now();
    const kind = state?.kind ?? StateKind.UNSPECIFIED;
    if (conversation) {
      const c = conversation;
      title.textContent = c.slug || c.id;
      document.title = `${c.slug} · Bedrock`;
      renderIf(meta, [c.cwd, c.model, c.continuedFromId].join('\n'), () =>
        replace(
          meta,
          h('code', { title: 'Working directory' }, c.cwd),
          ' · ',
          h('span', { title: 'Model' }, c.model),
          c.continuedFromId
            ? [' · continued from ', h('a', { href: `/c/${c.continuedFromId}`, 'data-link': true }, 'the earlier conversation')]
            : null,
        ),
      );
    }

    const sandbox = conversation?.sandboxAvailable ?? true;
    const m = modeLine(mode, sandbox);
    const canDowngrade = sandbox && mode === Mode.UNRESTRICTED && !isFinished(kind);
    renderIf(modeEl, `${m.label}|${m.detail}|${canDowngrade}`, () =>
      replace(
        modeEl,
        h('span', { class: `mode-badge mode-${m.tone}` }, m.label),
        h('span', { class: 'mode-detail' }, m.detail),
        canDowngrade
          ? h(
              'button',
              {
                type: 'button',
                class: 'small',
                onclick: () => void act((requestId) => api.downgradeMode({ conversationId: id, requestId })),
              },
              'Switch to Restricted',
            )
          : null,
      ),
    );

    if (conversation) {
      const c = conversation;
      const canChange = !isFinished(kind);
      renderIf(settingsEl, `${c.thinking}|${c.serverTools.join(',')}|${canChange}`, () => renderSettings(c, canChange));
    }

    const line = stateLine(state, retry, now);
    stateEl.dataset.tone = line.tone;
    stateEl.dataset.state = StateKind[kind] ?? String(kind);
    renderIf(stateEl, `${line.tone}|${line.text}`, () =>
      replace(
        stateEl,
        h('span', { class: 'state-dot', 'aria-hidden': 'true' }),
        h('span', { class: 'state-text', title: kind === StateKind.ERROR ? state?.errorMessage : line.text }, line.text),
      ),
    );

    const u = usageView(usage);
    const offerContinuation = u.warning && (kind === StateKind.IDLE || kind === StateKind.ERROR);
    renderIf(usageEl, `${u.text}|${u.warning}|${offerContinuation}`, () => renderUsage(u, offerContinuation));

    // The upgrade question: a modal dialog once per request; a banner reopens it after Escape.
    const awaiting = kind === StateKind.AWAITING_MODE_APPROVAL;
    if (awaiting) {
      const reason = upgradeReason || state?.upgradeReason || '';
      dialogReason.textContent = reason || '(no reason given)';
      if (!askedForThisUpgrade && !dialog.open) {
        askedForThisUpgrade = true;
        dialog.showModal();
      }
      upgradeBanner.hidden = dialog.open;
    } else {
      askedForThisUpgrade = false;
      upgradeReason = '';
      upgradeBanner.hidden = true;
      if (dialog.open) dialog.close();
    }

    const exhausted = kind === StateKind.CONTEXT_EXHAUSTED;
    exhaustedPanel.hidden = !exhausted;
    composer.setState({
      busy: isBusy(kind),
      canCancel: canCancel(kind),
      hidden: exhausted || isFinished(kind) || !conversation?.userInitiated,
    });
    transcript.onState(kind, state?.currentToolUseId ?? '');
    connectionEl.hidden = connected;

    // Keep the countdown moving while a retry waits.
    if (retry && ticker === undefined) ticker = window.setInterval(render, 250);
    if (!retry && ticker !== undefined) {
      window.clearInterval(ticker);
      ticker = undefined;
    }
    if (kind !== lastListedKind) {
      lastListedKind = kind;
      deps.listChanged();
    }
  }

  const stopWatch = watch(api, id, {
    event: onEvent,
    connected(ok) {
      connected = ok;
      render();
    },
    failed(err) {
      if (isUnauthenticated(err)) deps.authFailed(errorText(err));
      else {
        title.textContent = 'Conversation unavailable';
        showError(errorText(err));
        composer.setState({ busy: false, canCancel: false, hidden: true });
      }
    },
  });
  render();

  return {
    el,
    dispose() {
      stopWatch();
      if (ticker !== undefined) window.clearInterval(ticker);
      if (dialog.open) dialog.close();
      composer.dispose();
    },
  };
}

/**
 * Rebuilds `el` only when `key` changed: render() runs on every event and on the retry
 * countdown's tick, and rebuilding unchanged parts would drop keyboard focus from their
 * buttons and make screen readers repeat the state line.
 */
function renderIf(el: HTMLElement, key: string, build: () => void): void {
  if (el.dataset.key === key) return;
  el.dataset.key = key;
  build();
}

/** A retry pending according to the state (kept as is when already known, so the countdown does not jump). */
function retryFromState(state: ConversationState | undefined, now: number, known: PendingRetry | undefined): PendingRetry | undefined {
  if (!state || state.retryDelayMs === 0n) return undefined;
  if (state.kind !== StateKind.LLM_REQUESTING && state.kind !== StateKind.AWAITING_CONTINUATION) return undefined;
  if (known && known.attempt === state.attempt) return known;
  return {
    attempt: state.attempt,
    maxAttempts: state.maxAttempts,
    at: now + Number(state.retryDelayMs),
    errorKind: state.errorKind,
    errorMessage: state.errorMessage,
  };
}
