/**
 * The Bedrock web UI (Preact): sign-in with the bearer token, the conversation list and one
 * conversation at a time, with client-side routes `/` and `/c/<id>` (web-bff serves index.html for
 * both). On a phone (≤ 760 px) the list and the new-conversation form are a drawer, so the
 * conversation owns the screen. docs/web-ui.md, "Phone and keyboard".
 */
import { render } from 'preact';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import { createApi, createMcpApi, createWorkspaceApi } from './api.ts';
import { forgetToken, saveToken, storedToken, takeTokenFromUrl } from './auth.ts';
import { ConversationView } from './conversation-view.tsx';
import { McpServersDialog } from './mcp-servers.tsx';
import { Sidebar } from './sidebar.tsx';

const api = createApi();
const workspaces = createWorkspaceApi();
const mcp = createMcpApi();
const PHONE = '(max-width: 760px)';

function routeId(path: string): string | undefined {
  const m = /^\/c\/([^/]+)\/?$/.exec(path);
  return m ? decodeURIComponent(m[1]!) : undefined;
}

/** A link's token that differs from the kept one: asked about before it replaces it. */
const linkToken = takeTokenFromUrl();

function App() {
  const [signedIn, setSignedIn] = useState(() => Boolean(storedToken()));
  const [pending, setPending] = useState(linkToken);
  const [signInMessage, setSignInMessage] = useState('');
  const signedInRef = useRef(signedIn);
  signedInRef.current = signedIn;

  // Without a token of its own, the UI may sit behind an authenticating proxy that adds one to
  // every request (docs/web-bff.md, "The web UI behind your sign-in"): ask once; if the API
  // answers, it is signed in.
  useEffect(() => {
    if (signedInRef.current) return;
    let live = true;
    api.listConversations({}).then(
      () => live && !storedToken() && setSignedIn(true),
      () => undefined,
    );
    return () => {
      live = false;
    };
  }, []);

  // Later refusals of calls already in flight add nothing once the sign-in form shows.
  const authFailed = useCallback((message: string) => {
    if (!signedInRef.current) return;
    forgetToken();
    signedInRef.current = false;
    setSignInMessage(`Signed out: ${message}`);
    setSignedIn(false);
  }, []);

  if (!signedIn)
    return (
      <SignIn
        message={signInMessage}
        done={(token) => {
          saveToken(token);
          setSignInMessage('');
          setSignedIn(true);
        }}
      />
    );
  return (
    <>
      <Shell authFailed={authFailed} />
      {pending ? (
        <ReplaceTokenDialog
          answer={(replace) => {
            setPending(undefined);
            if (!replace) return;
            saveToken(pending);
            // Everything shown belongs to the other token's user: start again as the new one.
            location.reload();
          }}
        />
      ) : null}
    </>
  );
}

/**
 * Asked when a link carries a token other than the one kept: keep it (the default, and Esc), or
 * sign in with the link's. Someone else's link would otherwise sign the page in as them.
 */
function ReplaceTokenDialog({ answer }: { answer(replace: boolean): void }) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (d && !d.open) d.showModal();
  }, []);
  const close = (replace: boolean) => {
    dialog.current?.close();
    answer(replace);
  };
  return (
    <dialog
      class="upgrade-dialog token-dialog"
      aria-labelledby="token-title"
      aria-describedby="token-desc"
      ref={dialog}
      onCancel={(ev) => {
        ev.preventDefault();
        close(false);
      }}
    >
      <h2 id="token-title">Sign in with the link's token?</h2>
      <p id="token-desc">
        The link you opened carries a different token from the one you are signed in with. Using it signs this browser in as whoever that
        token belongs to — possibly someone else, who would then see what you type. Keep your sign-in unless you expected this.
      </p>
      <div class="dialog-buttons">
        <button type="button" class="primary" autofocus onClick={() => close(false)}>
          Keep my sign-in
        </button>
        <button type="button" class="secondary" onClick={() => close(true)}>
          Use the link's token
        </button>
      </div>
    </dialog>
  );
}

function SignIn({ message, done }: { message: string; done(token: string): void }) {
  const input = useRef<HTMLInputElement>(null);
  useEffect(() => input.current?.focus(), []);
  return (
    <main class="sign-in-page">
      <form
        class="sign-in"
        onSubmit={(ev) => {
          ev.preventDefault();
          done(input.current?.value.trim() ?? '');
        }}
      >
        <h1>Bedrock</h1>
        <p>
          Paste your access token. <code>npm start</code> prints a link that includes it.
        </p>
        {message ? (
          <p class="sign-in-note" role="status">
            {message}
          </p>
        ) : null}
        <label for="token">Token</label>
        <input id="token" ref={input} type="password" required autocomplete="off" spellcheck={false} />
        <button type="submit" class="primary">
          Sign in
        </button>
      </form>
    </main>
  );
}

function usePhone(): boolean {
  const [phone, setPhone] = useState(() => matchMedia(PHONE).matches);
  useEffect(() => {
    const mq = matchMedia(PHONE);
    const onChange = () => setPhone(mq.matches);
    mq.addEventListener('change', onChange);
    return () => mq.removeEventListener('change', onChange);
  }, []);
  return phone;
}

/**
 * The shell: top bar, drawer, shortcuts dialog and routes. Keys: Ctrl/⌘+Shift+O starts a new
 * conversation (focuses its form), `/` focuses the message box, Esc cancels the running turn or
 * closes the drawer; `?` lists them.
 */
function Shell({ authFailed }: { authFailed(message: string): void }) {
  const [path, setPath] = useState(location.pathname);
  const [listVersion, setListVersion] = useState(0);
  const [drawer, setDrawer] = useState(false);
  const [mcpOpen, setMcpOpen] = useState(false);
  const phone = usePhone();
  const shortcuts = useRef<HTMLDialogElement>(null);
  const menuButton = useRef<HTMLButtonElement>(null);

  const listChanged = useCallback(() => setListVersion((v) => v + 1), []);
  const navigate = useCallback((to: string) => {
    if (location.pathname !== to) history.pushState(null, '', to);
    setPath(to);
    setDrawer(false);
    setListVersion((v) => v + 1);
  }, []);

  const newConversation = useCallback(() => {
    setDrawer(true);
    // The form's first field: the workspace.
    const focusWorkspace = () => {
      const field = document.getElementById('new-workspace') as HTMLSelectElement | null;
      if (!field || document.activeElement === field) return;
      field.focus();
    };
    // At once where the form is beside the conversation (a page in the background gets no
    // animation frames); in the drawer, after it has opened (it is inert while closed).
    focusWorkspace();
    requestAnimationFrame(focusWorkspace);
  }, []);

  useEffect(() => {
    const onPop = () => setPath(location.pathname);
    // In-app links navigate without reloading.
    const onClick = (ev: MouseEvent) => {
      const a = (ev.target as Element | null)?.closest?.('a[data-link]');
      if (!(a instanceof HTMLAnchorElement) || ev.defaultPrevented || ev.button !== 0 || ev.metaKey || ev.ctrlKey || ev.shiftKey) return;
      ev.preventDefault();
      navigate(a.pathname);
    };
    const onKey = (ev: KeyboardEvent) => {
      if (ev.isComposing) return;
      if ((ev.ctrlKey || ev.metaKey) && ev.shiftKey && ev.key.toLowerCase() === 'o') {
        ev.preventDefault();
        newConversation();
        return;
      }
      const typing = (ev.target as HTMLElement | null)?.closest?.('input, textarea, select, [contenteditable="true"]');
      if (ev.key === '?' && !typing && !document.querySelector('dialog[open]')) {
        ev.preventDefault();
        shortcuts.current?.showModal();
      }
    };
    addEventListener('popstate', onPop);
    document.addEventListener('click', onClick);
    document.addEventListener('keydown', onKey);
    return () => {
      removeEventListener('popstate', onPop);
      document.removeEventListener('click', onClick);
      document.removeEventListener('keydown', onKey);
    };
  }, [navigate, newConversation]);

  // The open drawer takes Esc (before the conversation's cancel) and gives focus back to its button.
  useEffect(() => {
    if (!drawer) return;
    const onKey = (ev: KeyboardEvent) => {
      if (ev.key !== 'Escape' || document.querySelector('dialog[open]')) return;
      ev.preventDefault();
      setDrawer(false);
      menuButton.current?.focus();
    };
    document.addEventListener('keydown', onKey, true);
    return () => document.removeEventListener('keydown', onKey, true);
  }, [drawer]);

  const id = routeId(path);
  useEffect(() => {
    if (!id) document.title = 'Bedrock';
  }, [id]);
  const drawerOpen = phone && drawer;

  return (
    <>
      <a class="skip-link" href="#main">
        Skip to conversation
      </a>
      <header class={`topbar${drawerOpen ? ' drawer-open' : ''}`}>
        <button
          type="button"
          class="menu-button"
          ref={menuButton}
          aria-label="Conversations"
          aria-controls="sidebar"
          aria-expanded={drawerOpen}
          onClick={() => setDrawer(!drawer)}
        >
          <span aria-hidden="true">☰</span>
        </button>
        <a href="/" data-link class="brand">
          Bedrock
        </a>
        <span class="spacer" />
        <button type="button" class="small" aria-keyshortcuts="Control+Shift+O Meta+Shift+O" onClick={newConversation}>
          <span aria-hidden="true">+ </span>New<span class="wide-only"> conversation</span>
        </button>
        <button type="button" class="small" aria-haspopup="dialog" onClick={() => setMcpOpen(true)}>
          MCP<span class="wide-only"> servers</span>
        </button>
        <button
          type="button"
          class="small icon-button"
          aria-label="Keyboard shortcuts"
          aria-keyshortcuts="?"
          onClick={() => shortcuts.current?.showModal()}
        >
          ?
        </button>
        <button type="button" class="link" onClick={() => authFailed('you signed out')}>
          Sign out
        </button>
      </header>
      <div class="layout">
        <Sidebar
          api={api}
          workspaces={workspaces}
          current={id ?? ''}
          listVersion={listVersion}
          open={drawerOpen}
          inert={phone && !drawer}
          authFailed={authFailed}
          navigate={navigate}
        />
        {drawerOpen ? <div class="drawer-backdrop" aria-hidden="true" onClick={() => setDrawer(false)} /> : null}
        <main class="main" id="main" inert={drawerOpen}>
          {id ? (
            <ConversationView key={id} id={id} deps={{ api, workspaces, mcp, authFailed, listChanged, navigate }} />
          ) : (
            <div class="welcome">
              <h1>Welcome to Bedrock</h1>
              <p>
                {phone ? 'Open the conversations (☰) to pick one' : 'Pick a conversation on the left'}, or start a new one in a working
                directory.
              </p>
              <p>New conversations start in Restricted mode: the agent can read but not change anything until you approve its request.</p>
              <p>
                Keys: <kbd>Ctrl</kbd>+<kbd>Shift</kbd>+<kbd>O</kbd> new conversation · <kbd>/</kbd> message box · <kbd>Esc</kbd> cancel the
                running turn · <kbd>?</kbd> all shortcuts
              </p>
            </div>
          )}
        </main>
      </div>
      <McpServersDialog mcp={mcp} conversationId={id ?? ''} open={mcpOpen} close={() => setMcpOpen(false)} authFailed={authFailed} />
      <dialog class="shortcuts-dialog" aria-labelledby="shortcuts-title" ref={shortcuts}>
        <h2 id="shortcuts-title">Keyboard shortcuts</h2>
        <dl class="shortcuts">
          <dt>
            <kbd>Ctrl</kbd>+<kbd>Shift</kbd>+<kbd>O</kbd> (<kbd>⌘</kbd>+<kbd>Shift</kbd>+<kbd>O</kbd>)
          </dt>
          <dd>New conversation</dd>
          <dt>
            <kbd>/</kbd>
          </dt>
          <dd>Focus the message box</dd>
          <dt>
            <kbd>Enter</kbd> / <kbd>Shift</kbd>+<kbd>Enter</kbd>
          </dt>
          <dd>Send (queued while the agent works) / new line</dd>
          <dt>
            <kbd>Alt</kbd>+<kbd>Enter</kbd>
          </dt>
          <dd>While the agent works: steer, given to it at the next tool boundary</dd>
          <dt>
            <kbd>Esc</kbd>
          </dt>
          <dd>Cancel the running turn; close a dialog, menu or the drawer</dd>
          <dt>
            <kbd>?</kbd>
          </dt>
          <dd>This list</dd>
        </dl>
        <form method="dialog" class="dialog-buttons">
          <button class="primary">Close</button>
        </form>
      </dialog>
    </>
  );
}

render(<App />, document.getElementById('app')!);
