/**
 * The conversation list (newest first, searchable) and the new-conversation form. On a wide
 * screen it is a column beside the conversation; on a phone it is a drawer (main.tsx).
 */
import { StateKind, type Conversation, type ServerTool, type ThinkingLevel } from '@bedrock/contracts';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { SERVER_TOOLS, serverToolLabel, serverToolName, THINKING_CHOICES, thinkingLabel } from '@bedrock/agent-view/agent-content';
import { isBusy, stateShort } from '@bedrock/agent-view/format';
import { retrying } from '@bedrock/agent-view/retry';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, isUnauthenticated, type Api } from './api.ts';
import { RelativeTime } from './time.tsx';
import { SpendLine } from './spend-line.tsx';
import { conversationTitle, SEARCH_DELAY_MS, SEARCH_MAX, searchQuery } from './titles.ts';

export interface SidebarProps {
  readonly api: Api;
  readonly current: string;
  /** Bumped when the list should be loaded again. */
  readonly listVersion: number;
  readonly open: boolean;
  /** On a phone while the drawer is closed: out of the tab order and hidden from screen readers. */
  readonly inert: boolean;
  authFailed(message: string): void;
  navigate(path: string): void;
}

const LAST_CWD = 'bedrock.lastCwd';

export function Sidebar(props: SidebarProps) {
  const [conversations, setConversations] = useState<Conversation[] | undefined>(undefined);
  /** The query the shown list answers ('' for all). */
  const [listedFor, setListedFor] = useState('');
  const [listError, setListError] = useState('');
  /** What is typed in the search box, and what is asked of the server (after a pause in typing). */
  const [typed, setTyped] = useState('');
  const [query, setQuery] = useState('');
  const wanted = useRef('');
  const loading = useRef<Promise<void> | undefined>(undefined);
  const again = useRef(false);

  useEffect(() => {
    const q = searchQuery(typed);
    if (q === query) return;
    const timer = window.setTimeout(() => setQuery(q), SEARCH_DELAY_MS);
    return () => window.clearTimeout(timer);
  }, [typed]);

  // Reloads the list (for the current query); requests that come while one runs are merged into
  // one more, and only the answer to the latest is shown.
  useEffect(() => {
    wanted.current = query;
    if (loading.current) {
      again.current = true;
      return;
    }
    loading.current = (async () => {
      do {
        again.current = false;
        const q = wanted.current;
        try {
          const res = await props.api.listConversations({ pageSize: 100, query: q });
          if (again.current) continue;
          setConversations(res.conversations);
          setListedFor(q);
          setListError('');
        } catch (err) {
          if (isUnauthenticated(err)) props.authFailed(errorText(err));
          else if (!again.current) setListError(`Could not load conversations: ${errorText(err)}`);
        }
      } while (again.current);
      loading.current = undefined;
    })();
  }, [props.listVersion, query]);

  const shown = conversations ?? [];
  const searching = searchQuery(typed) !== listedFor;
  return (
    <nav
      class={`sidebar${props.open ? ' open' : ''}`}
      id="sidebar"
      aria-label="Conversations"
      inert={props.inert}
      aria-hidden={props.inert ? 'true' : undefined}
    >
      <NewConversation api={props.api} authFailed={props.authFailed} navigate={props.navigate} />
      <div class="list-head">
        <h2 class="list-title">Conversations</h2>
        <input
          type="search"
          id="conversation-search"
          class="search"
          placeholder="Search"
          aria-label="Search conversations by title"
          aria-controls="conversation-list"
          autocomplete="off"
          spellcheck={false}
          maxLength={SEARCH_MAX}
          value={typed}
          onInput={(ev) => setTyped(ev.currentTarget.value)}
          onKeyDown={(ev) => {
            // Down goes to the first result; Esc empties the box (then leaves Esc to the page).
            if (ev.key === 'ArrowDown') {
              const first = document.querySelector<HTMLAnchorElement>('#conversation-list a');
              if (first) {
                ev.preventDefault();
                first.focus();
              }
            } else if (ev.key === 'Escape' && typed) {
              ev.preventDefault();
              ev.stopPropagation();
              setTyped('');
            }
          }}
        />
      </div>
      <p class="list-status" role="status" aria-live="polite" aria-busy={searching ? 'true' : undefined}>
        {conversations === undefined && !listError
          ? 'Loading…'
          : listError
            ? listError
            : shown.length > 0
              ? listedFor
                ? `${shown.length === 1 ? '1 conversation matches' : `${shown.length} conversations match`} “${listedFor}”`
                : ''
              : listedFor
                ? `No conversation has “${listedFor}” in its title.`
                : 'No conversations yet.'}
      </p>
      <ul class="conversation-list" id="conversation-list" aria-busy={searching ? 'true' : undefined}>
        {shown.map((c) => (
          <Item key={c.id} conversation={c} current={c.id === props.current} />
        ))}
      </ul>
      <SpendLine api={props.api} refresh={props.listVersion} />
    </nav>
  );
}

function Item({ conversation: c, current }: { conversation: Conversation; current: boolean }) {
  const kind = c.state?.kind ?? StateKind.UNSPECIFIED;
  const tone =
    kind === StateKind.ERROR || kind === StateKind.FAILED
      ? 'error'
      : kind === StateKind.AWAITING_MODE_APPROVAL
        ? 'attention'
        : isBusy(kind)
          ? 'busy'
          : 'idle';
  const updated = c.updatedAt ? timestampMs(c.updatedAt) : c.createdAt ? timestampMs(c.createdAt) : undefined;
  return (
    <li>
      <a href={`/c/${c.id}`} data-link data-id={c.id} aria-current={current ? 'page' : undefined}>
        <span class={`conv-slug${c.title.trim() ? '' : ' untitled'}`}>{conversationTitle(c)}</span>
        <span class={`conv-state tone-${tone}`}>{stateShort(kind)}</span>
        <span class="conv-cwd">{c.cwd}</span>
        <RelativeTime at={updated} class="conv-when" />
      </a>
    </li>
  );
}

function NewConversation({ api, authFailed, navigate }: Pick<SidebarProps, 'api' | 'authFailed' | 'navigate'>) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const cwd = useRef<HTMLInputElement>(null);
  const model = useRef<HTMLInputElement>(null);
  const thinking = useRef<HTMLSelectElement>(null);
  const boxes = useRef(new Map<ServerTool, HTMLInputElement>());

  const create = async () => {
    const dir = cwd.current?.value.trim() ?? '';
    const level = Number(thinking.current?.value) as ThinkingLevel;
    const serverTools = SERVER_TOOLS.filter((t) => boxes.current.get(t)?.checked);
    setError('');
    setBusy(true);
    try {
      // One request id for this click, repeated on retries: one conversation however many tries it takes.
      const res = await retrying(
        (requestId) =>
          api.createConversation({ cwd: dir, model: model.current?.value.trim() ?? '', thinking: level, serverTools, requestId }),
        { onRetry: ({ attempt, attempts, error }) => setError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`) },
      );
      setError('');
      localStorage.setItem(LAST_CWD, dir);
      if (res.conversation) navigate(`/c/${res.conversation.id}`);
    } catch (err) {
      if (isUnauthenticated(err)) return authFailed(errorText(err));
      setError(errorText(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <form
      class="new-conversation"
      aria-labelledby="new-title"
      onSubmit={(ev) => {
        ev.preventDefault();
        void create();
      }}
    >
      <h2 id="new-title">New conversation</h2>
      <label for="new-cwd">Working directory</label>
      <input
        id="new-cwd"
        name="cwd"
        ref={cwd}
        required
        placeholder="/home/me/project"
        autocomplete="off"
        spellcheck={false}
        defaultValue={localStorage.getItem(LAST_CWD) ?? ''}
      />
      <label for="new-model">Model (optional)</label>
      <input id="new-model" name="model" ref={model} placeholder="default" autocomplete="off" spellcheck={false} />
      {/* Default: the deployment's (BEDROCK_DEFAULT_THINKING); web tools are off unless asked for (and allowed). */}
      <label for="new-thinking">Thinking</label>
      <select id="new-thinking" name="thinking" ref={thinking}>
        {THINKING_CHOICES.map((level) => (
          <option key={level} value={String(level)}>
            {thinkingLabel(level)}
          </option>
        ))}
      </select>
      <fieldset class="checks">
        <legend>Web tools</legend>
        {SERVER_TOOLS.map((tool) => (
          <label class="check" for={`new-${serverToolName(tool)}`} key={tool}>
            <input
              type="checkbox"
              id={`new-${serverToolName(tool)}`}
              name={serverToolName(tool)}
              ref={(el) => {
                if (el) boxes.current.set(tool, el);
              }}
            />
            {serverToolLabel(tool)}
          </label>
        ))}
      </fieldset>
      {error ? (
        <p class="form-error" role="alert">
          {error}
        </p>
      ) : null}
      <button type="submit" class="primary" disabled={busy}>
        Start
      </button>
    </form>
  );
}
