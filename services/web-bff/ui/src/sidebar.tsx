/**
 * The conversation list (newest first, searchable) and the new-conversation form (a workspace of
 * the user's, or a new one, and a directory inside it; a host directory on single-user installs). On a wide
 * screen it is a column beside the conversation; on a phone it is a drawer (main.tsx).
 */
import { StateKind, type Conversation, type ServerTool, type ThinkingLevel } from '@bedrock/contracts';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { SERVER_TOOLS, THINKING_CHOICES, thinkingLabel } from '@bedrock/agent-view/agent-content';
import { isBusy, stateShort } from '@bedrock/agent-view/format';
import { retrying } from '@bedrock/agent-view/retry';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, isUnauthenticated, type Api, type WorkspaceApi } from './api.ts';
import { DEFAULT_WORKSPACE, type Place } from './workspaces.ts';
import { RelativeTime } from './time.tsx';
import { SpendLine } from './spend-line.tsx';
import { conversationTitle, SEARCH_DELAY_MS, SEARCH_MAX, searchQuery } from './titles.ts';
import { focusComposerOnOpen } from './composer.tsx';
import { ServerToolChecks } from './settings-panel.tsx';

export interface SidebarProps {
  readonly api: Api;
  readonly workspaces: WorkspaceApi;
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
const LAST_WORKSPACE = 'bedrock.lastWorkspace';

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
      <NewConversation api={props.api} workspaces={props.workspaces} authFailed={props.authFailed} navigate={props.navigate} />
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

/** The value of the workspace select's "New workspace…" choice (no workspace name can start with a space). */
const NEW_WORKSPACE = ' new';

/** `default` first (the server makes it on first use), then the user's others by name. */
function workspaceChoices(names: readonly string[]): string[] {
  return [DEFAULT_WORKSPACE, ...[...new Set(names)].filter((n) => n !== DEFAULT_WORKSPACE).sort()];
}

function NewConversation({ api, workspaces, authFailed, navigate }: Pick<SidebarProps, 'api' | 'workspaces' | 'authFailed' | 'navigate'>) {
  const [error, setError] = useState('');
  const [busy, setBusy] = useState(false);
  const [names, setNames] = useState<string[]>([DEFAULT_WORKSPACE]);
  const [chosen, setChosen] = useState(() => localStorage.getItem(LAST_WORKSPACE) || DEFAULT_WORKSPACE);
  const newName = useRef<HTMLInputElement>(null);
  const gitUrl = useRef<HTMLInputElement>(null);
  const dir = useRef<HTMLInputElement>(null);
  const cwd = useRef<HTMLInputElement>(null);
  const model = useRef<HTMLInputElement>(null);
  const thinking = useRef<HTMLSelectElement>(null);
  const boxes = useRef(new Map<ServerTool, HTMLInputElement>());

  // The user's workspaces; without an answer (no workspace storage) the choice is `default` alone.
  useEffect(() => {
    let live = true;
    workspaces
      .listWorkspaces({})
      .then((res) => live && setNames(workspaceChoices(res.workspaces.map((w) => w.name))))
      .catch(() => undefined);
    return () => {
      live = false;
    };
  }, [workspaces]);
  const selected = chosen === NEW_WORKSPACE || names.includes(chosen) ? chosen : DEFAULT_WORKSPACE;
  const onRetry = ({ attempt, attempts, error }: { attempt: number; attempts: number; error: unknown }) =>
    setError(`${errorText(error)} — trying again (attempt ${attempt} of ${attempts})…`);

  /** Where the conversation works: a filled host directory; else the workspace (made first when new) and the directory inside it. */
  const placeChosen = async (): Promise<Place | undefined> => {
    const host = cwd.current?.value.trim() ?? '';
    if (host) {
      if (host.startsWith('/')) return { workspace: '', cwd: host };
      setError('A host directory is an absolute path, such as /home/me/project (or leave it empty to use the workspace).');
      cwd.current?.focus();
      return undefined;
    }
    let workspace = selected;
    if (selected === NEW_WORKSPACE) {
      const name = newName.current?.value.trim() ?? '';
      if (!name) {
        setError('Give the new workspace a name.');
        newName.current?.focus();
        return undefined;
      }
      const git = gitUrl.current?.value.trim() ?? '';
      // One request id for this click: one workspace however many tries it takes.
      const res = await retrying(
        (requestId) => workspaces.createWorkspace({ name, requestId, source: git ? { case: 'gitUrl', value: git } : { case: undefined } }),
        { onRetry },
      );
      workspace = res.workspace?.name ?? name;
      // Made: a second click (after a refused conversation) uses it rather than making it again.
      setNames((known) => workspaceChoices([...known, workspace]));
      setChosen(workspace);
    }
    // `default` goes as no name: the server uses the user's default workspace, made on first use.
    return { workspace: workspace === DEFAULT_WORKSPACE ? '' : workspace, cwd: dir.current?.value.trim() ?? '' };
  };

  const create = async () => {
    const level = Number(thinking.current?.value) as ThinkingLevel;
    const serverTools = SERVER_TOOLS.filter((t) => boxes.current.get(t)?.checked);
    setError('');
    setBusy(true);
    try {
      const place = await placeChosen();
      if (!place) return;
      // One request id for this click, repeated on retries: one conversation however many tries it takes.
      const res = await retrying(
        (requestId) =>
          api.createConversation({ ...place, model: model.current?.value.trim() ?? '', thinking: level, serverTools, requestId }),
        { onRetry },
      );
      setError('');
      const host = !place.workspace && place.cwd.startsWith('/');
      if (!host) localStorage.setItem(LAST_WORKSPACE, place.workspace || DEFAULT_WORKSPACE);
      localStorage.setItem(LAST_CWD, host ? place.cwd : '');
      if (res.conversation) {
        focusComposerOnOpen();
        navigate(`/c/${res.conversation.id}`);
      }
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
      <label for="new-workspace">Workspace</label>
      <select id="new-workspace" name="workspace" value={selected} onChange={(ev) => setChosen(ev.currentTarget.value)}>
        {names.map((name) => (
          <option key={name} value={name}>
            {name}
          </option>
        ))}
        <option value={NEW_WORKSPACE}>New workspace…</option>
      </select>
      {selected === NEW_WORKSPACE ? (
        <>
          <label for="new-workspace-name">New workspace name</label>
          <input
            id="new-workspace-name"
            name="workspace-name"
            ref={newName}
            placeholder="my-project"
            pattern="[a-z0-9][a-z0-9._\-]{0,62}"
            title="1 to 63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit"
            autocomplete="off"
            spellcheck={false}
          />
          <label for="new-workspace-git">Clone from git (optional)</label>
          <input
            id="new-workspace-git"
            name="workspace-git"
            ref={gitUrl}
            placeholder="https://github.com/me/project.git"
            autocomplete="off"
            spellcheck={false}
          />
        </>
      ) : null}
      <label for="new-dir">Directory in the workspace (optional)</label>
      <input id="new-dir" name="dir" ref={dir} placeholder="e.g. src/app" autocomplete="off" spellcheck={false} />
      <label for="new-cwd">Host directory (single-user installs)</label>
      <input
        id="new-cwd"
        name="cwd"
        ref={cwd}
        placeholder="/home/me/project (instead of a workspace)"
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
      <ServerToolChecks idPrefix="new" boxes={boxes.current} named />
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
