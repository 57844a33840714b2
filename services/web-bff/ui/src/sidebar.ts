/** The conversation list (newest first) and the new-conversation form. */
import { StateKind, type Conversation, type ServerTool, type ThinkingLevel } from '@bedrock/contracts';
import { SERVER_TOOLS, serverToolLabel, serverToolName, THINKING_CHOICES, thinkingLabel } from '@bedrock/agent-view/agent-content';
import { errorText, isUnauthenticated, type Api } from './api.ts';
import { h, replace } from './dom.ts';
import { isBusy, stateShort } from '@bedrock/agent-view/format';
import { retrying } from '@bedrock/agent-view/retry';

export interface SidebarDeps {
  readonly api: Api;
  authFailed(message: string): void;
  navigate(path: string): void;
}

const LAST_CWD = 'bedrock.lastCwd';

export class Sidebar {
  readonly el: HTMLElement;
  private readonly list: HTMLUListElement;
  private readonly status: HTMLElement;
  private readonly formError: HTMLElement;
  private current = '';
  private refreshing: Promise<void> | undefined;
  private again = false;

  constructor(private readonly deps: SidebarDeps) {
    const cwd = h('input', {
      id: 'new-cwd',
      name: 'cwd',
      required: true,
      placeholder: '/home/me/project',
      autocomplete: 'off',
      spellcheck: 'false',
      value: localStorage.getItem(LAST_CWD) ?? '',
    });
    const model = h('input', { id: 'new-model', name: 'model', placeholder: 'default', autocomplete: 'off', spellcheck: 'false' });
    // Default: the deployment's (BEDROCK_DEFAULT_THINKING); web tools are off unless asked for (and allowed).
    const thinking = h(
      'select',
      { id: 'new-thinking', name: 'thinking' },
      THINKING_CHOICES.map((level) => h('option', { value: String(level) }, thinkingLabel(level))),
    );
    const tools = SERVER_TOOLS.map((tool) => ({
      tool,
      box: h('input', { type: 'checkbox', id: `new-${serverToolName(tool)}`, name: serverToolName(tool) }),
    }));
    this.formError = h('p', { class: 'form-error', role: 'alert', hidden: true });
    const form = h(
      'form',
      { class: 'new-conversation', 'aria-labelledby': 'new-title' },
      h('h2', { id: 'new-title' }, 'New conversation'),
      h('label', { for: 'new-cwd' }, 'Working directory'),
      cwd,
      h('label', { for: 'new-model' }, 'Model (optional)'),
      model,
      h('label', { for: 'new-thinking' }, 'Thinking'),
      thinking,
      h(
        'fieldset',
        { class: 'checks' },
        h('legend', {}, 'Web tools'),
        tools.map(({ tool, box }) => h('label', { class: 'check', for: box.id }, box, serverToolLabel(tool))),
      ),
      this.formError,
      h('button', { type: 'submit', class: 'primary' }, 'Start'),
    );
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const level = Number(thinking.value) as ThinkingLevel;
      const chosen: ServerTool[] = tools.filter(({ box }) => box.checked).map(({ tool }) => tool);
      void this.create(cwd.value.trim(), model.value.trim(), level, chosen);
    });
    this.list = h('ul', { class: 'conversation-list' });
    this.status = h('p', { class: 'list-status' }, 'Loading…');
    this.el = h(
      'nav',
      { class: 'sidebar', 'aria-label': 'Conversations' },
      form,
      h('h2', { class: 'list-title' }, 'Conversations'),
      this.status,
      this.list,
    );
  }

  select(id: string): void {
    this.current = id;
    for (const a of this.list.querySelectorAll<HTMLAnchorElement>('a[data-id]')) {
      if (a.dataset.id === id) a.setAttribute('aria-current', 'page');
      else a.removeAttribute('aria-current');
    }
  }

  /** Reloads the list; calls that come while one runs are merged into one more. */
  refresh(): Promise<void> {
    if (this.refreshing) {
      this.again = true;
      return this.refreshing;
    }
    this.refreshing = (async () => {
      do {
        this.again = false;
        await this.load();
      } while (this.again);
      this.refreshing = undefined;
    })();
    return this.refreshing;
  }

  private async load(): Promise<void> {
    try {
      const res = await this.deps.api.listConversations({ pageSize: 100 });
      this.status.hidden = res.conversations.length > 0;
      this.status.textContent = 'No conversations yet.';
      // Keep keyboard focus on the same conversation across the rebuild.
      const focused = (document.activeElement as HTMLElement | null)?.dataset?.id;
      replace(
        this.list,
        res.conversations.map((c) => this.item(c)),
      );
      this.select(this.current);
      if (focused) this.list.querySelector<HTMLElement>(`a[data-id="${CSS.escape(focused)}"]`)?.focus();
    } catch (err) {
      if (isUnauthenticated(err)) this.deps.authFailed(errorText(err));
      else {
        this.status.hidden = false;
        this.status.textContent = `Could not load conversations: ${errorText(err)}`;
      }
    }
  }

  private item(c: Conversation): HTMLElement {
    const kind = c.state?.kind ?? StateKind.UNSPECIFIED;
    const label = stateShort(kind);
    const tone =
      kind === StateKind.ERROR || kind === StateKind.FAILED
        ? 'error'
        : kind === StateKind.AWAITING_MODE_APPROVAL
          ? 'attention'
          : isBusy(kind)
            ? 'busy'
            : 'idle';
    return h(
      'li',
      {},
      h(
        'a',
        { href: `/c/${c.id}`, 'data-link': true, 'data-id': c.id },
        h('span', { class: 'conv-slug' }, c.slug || c.id),
        h('span', { class: 'conv-cwd' }, c.cwd),
        h('span', { class: `conv-state tone-${tone}` }, label),
      ),
    );
  }

  private async create(cwd: string, model: string, thinking: ThinkingLevel, serverTools: ServerTool[]): Promise<void> {
    this.formError.hidden = true;
    try {
      // One request id for this click, repeated on retries: one conversation however many tries it takes.
      const res = await retrying((requestId) => this.deps.api.createConversation({ cwd, model, thinking, serverTools, requestId }), {
        onRetry: ({ attempt, attempts, error }) => {
          this.formError.hidden = false;
          this.formError.textContent = `${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`;
        },
      });
      this.formError.hidden = true;
      localStorage.setItem(LAST_CWD, cwd);
      await this.refresh();
      if (res.conversation) this.deps.navigate(`/c/${res.conversation.id}`);
    } catch (err) {
      if (isUnauthenticated(err)) return this.deps.authFailed(errorText(err));
      this.formError.hidden = false;
      this.formError.textContent = errorText(err);
    }
  }
}
