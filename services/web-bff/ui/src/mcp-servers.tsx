/**
 * MCP servers (docs/mcp.md): the panel that lists the operator's and the user's servers (and,
 * with a conversation open, that conversation's own and which are off there), adds a stdio
 * server for all the user's conversations and removes the user's own; and the per-conversation
 * on/off switches of the conversation's settings. Every change is one McpService call; the
 * service's refusal is shown as it words it.
 */
import type { McpServer } from '@bedrock/contracts';
import { useEffect, useRef, useState } from 'preact/hooks';
import { errorText, isUnauthenticated, startMcpLogin, type McpApi } from './api.ts';

/** Where a server comes from, as the user reads it. */
export function sourceLabel(s: McpServer): string {
  if (s.conversationId) return 'this conversation';
  return s.source === 'operator' ? 'operator' : 'yours';
}

/** A remote server's login as the user reads it; '' for a stdio server. */
export function loginLabel(s: Pick<McpServer, 'url' | 'authStatus'>): string {
  if (!s.url) return '';
  if (s.authStatus === 'logged_in') return 'logged in';
  if (s.authStatus === 'login_required') return 'login no longer valid: log in again';
  return 'not logged in';
}

/** The program and its arguments on one line, as a shell would show them (arguments with spaces quoted). */
export function commandLine(s: Pick<McpServer, 'command' | 'args'>): string {
  const quote = (a: string) => (a === '' || /[\s"'\\$`]/.test(a) ? `'${a.replace(/'/g, `'\\''`)}'` : a);
  return [s.command, ...s.args].map(quote).join(' ');
}

function useServers(mcp: McpApi, conversationId: string, authFailed: (m: string) => void, active: boolean) {
  const [servers, setServers] = useState<McpServer[] | undefined>(undefined);
  const [error, setError] = useState('');
  const [version, setVersion] = useState(0);
  useEffect(() => {
    if (!active) return;
    let live = true;
    mcp.listMcpServers({ conversationId }).then(
      (res) => {
        if (!live) return;
        setServers(res.servers);
        setError('');
      },
      (err: unknown) => {
        if (!live) return;
        if (isUnauthenticated(err)) return authFailed(errorText(err));
        setError(errorText(err));
      },
    );
    return () => {
      live = false;
    };
  }, [mcp, conversationId, active, version]);
  useEffect(() => {
    if (!active) return;
    // A login finishes in another tab: show its outcome when the user comes back.
    const again = () => setVersion((v) => v + 1);
    window.addEventListener('focus', again);
    return () => window.removeEventListener('focus', again);
  }, [active]);
  return { servers, error, reload: () => setVersion((v) => v + 1), setServers };
}

/**
 * The "MCP servers" dialog of the top bar, shown while `open`; closing it (Close, Esc) calls
 * `close`. `conversationId`: the open conversation ('' for none), whose own servers and off
 * switches are shown too. The list is loaded each time it opens.
 */
export function McpServersDialog({
  mcp,
  conversationId,
  open,
  close,
  authFailed,
}: {
  mcp: McpApi;
  conversationId: string;
  open: boolean;
  close(): void;
  authFailed(message: string): void;
}) {
  const dialog = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    const d = dialog.current;
    if (open && d && !d.open) d.showModal();
    if (!open && d?.open) d.close();
  }, [open]);
  return (
    <dialog class="mcp-dialog" aria-labelledby="mcp-title" ref={dialog} onClose={close}>
      <h2 id="mcp-title">MCP servers</h2>
      {/* Rendered only while open: a closed dialog's words must not be found on the page (tests, find-in-page). */}
      {open ? (
        <>
          <p class="mcp-intro">
            Their tools are offered to the agent beside its own, shown as <code>server › tool</code>. Each server runs in the conversation's
            sandbox as your tool user; in Restricted mode only tools that declare themselves read-only run.
          </p>
          <McpServersPanel mcp={mcp} conversationId={conversationId} authFailed={authFailed} />
        </>
      ) : null}
      <form method="dialog" class="dialog-buttons">
        <button class="primary">Close</button>
      </form>
    </dialog>
  );
}

export function McpServersPanel({
  mcp,
  conversationId,
  authFailed,
}: {
  mcp: McpApi;
  conversationId: string;
  authFailed(message: string): void;
}) {
  const { servers, error, reload } = useServers(mcp, conversationId, authFailed, true);
  const [problem, setProblem] = useState('');
  const [busy, setBusy] = useState(false);
  const name = useRef<HTMLInputElement>(null);
  const command = useRef<HTMLInputElement>(null);
  const args = useRef<HTMLTextAreaElement>(null);
  const timeout = useRef<HTMLInputElement>(null);

  const act = async (call: () => Promise<unknown>): Promise<boolean> => {
    setProblem('');
    setBusy(true);
    try {
      await call();
      reload();
      return true;
    } catch (err) {
      if (isUnauthenticated(err)) authFailed(errorText(err));
      else setProblem(errorText(err));
      return false;
    } finally {
      setBusy(false);
    }
  };

  const login = async (server: string) => {
    // Opened now, while the click still counts as the user's (a window opened after an await is blocked).
    const tab = window.open('', '_blank');
    const ok = await act(async () => {
      const url = await startMcpLogin(server);
      if (tab) {
        tab.opener = null;
        tab.location.href = url;
      } else location.assign(url);
    });
    if (!ok) tab?.close();
  };

  const add = async () => {
    const seconds = Number(timeout.current?.value || '0');
    const program = command.current?.value.trim() ?? '';
    // A URL is a remote server (Streamable HTTP); anything else a program to run.
    const remote = /^https?:\/\//i.test(program);
    const ok = await act(() =>
      mcp.addMcpServer({
        name: name.current?.value.trim() ?? '',
        ...(remote ? { url: program } : { command: program }),
        // One argument a line, kept as typed (spaces included); blank lines are not arguments.
        args: (args.current?.value ?? '').split('\n').filter((a) => a.trim() !== ''),
        timeoutMs: BigInt(Math.round((Number.isFinite(seconds) ? seconds : 0) * 1000)),
      }),
    );
    if (ok) for (const field of [name, command, args, timeout]) if (field.current) field.current.value = '';
  };

  return (
    <div class="mcp-panel" data-testid="mcp-servers">
      {error ? (
        <p class="form-error" role="alert">
          {error}
        </p>
      ) : null}
      {servers === undefined && !error ? <p class="loading">Loading the servers…</p> : null}
      {servers?.length === 0 ? <p class="mcp-none">No MCP servers yet.</p> : null}
      {servers?.length ? (
        <table class="mcp-table">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Source</th>
              <th scope="col">Command</th>
              <th scope="col">Trusted</th>
              {conversationId ? <th scope="col">Here</th> : null}
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {servers.map((s) => (
              <tr key={`${s.conversationId}/${s.name}`} data-server={s.name} data-source={s.source}>
                <td>
                  <strong>{s.name}</strong>
                </td>
                <td>{sourceLabel(s)}</td>
                <td>
                  <code class="mcp-command">{s.url || commandLine(s)}</code>
                  {s.url ? <span class={`mcp-login mcp-login-${s.authStatus || 'none'}`}> · {loginLabel(s)}</span> : null}
                  {s.timeoutMs ? <span class="mcp-timeout"> · timeout {Number(s.timeoutMs) / 1000}s</span> : null}
                </td>
                <td>{s.trusted ? 'trusted' : '—'}</td>
                {conversationId ? <td class={s.disabled ? 'mcp-off' : 'mcp-on'}>{s.disabled ? 'off' : 'on'}</td> : null}
                <td>
                  {s.url && !s.conversationId ? (
                    s.authStatus === 'logged_in' ? (
                      <button
                        type="button"
                        class="small"
                        disabled={busy}
                        aria-label={`Log out of ${s.name}`}
                        onClick={() => void act(() => mcp.logoutMcpServer({ name: s.name }))}
                      >
                        Log out
                      </button>
                    ) : (
                      <button
                        type="button"
                        class="small primary"
                        disabled={busy}
                        aria-label={`Log in to ${s.name}`}
                        onClick={() => void login(s.name)}
                      >
                        Log in
                      </button>
                    )
                  ) : null}
                  {s.source === 'operator' ? null : (
                    <button
                      type="button"
                      class="small"
                      disabled={busy}
                      aria-label={`Remove ${s.name}`}
                      onClick={() => void act(() => mcp.removeMcpServer({ name: s.name, conversationId: s.conversationId }))}
                    >
                      Remove
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      ) : null}
      <form
        class="mcp-add"
        aria-label="Add an MCP server"
        onSubmit={(ev) => {
          ev.preventDefault();
          void add();
        }}
      >
        <h3>Add a server for all your conversations</h3>
        <label for="mcp-name">Name</label>
        <input id="mcp-name" ref={name} autocomplete="off" spellcheck={false} placeholder="fs" />
        <label for="mcp-command">Command or URL</label>
        <input id="mcp-command" ref={command} autocomplete="off" spellcheck={false} placeholder="node   or   https://mcp.example.com/mcp" />
        <label for="mcp-args">Arguments (one a line)</label>
        <textarea id="mcp-args" ref={args} rows={3} spellcheck={false} placeholder={'/opt/mcp/server-filesystem/dist/index.js\n.'} />
        <label for="mcp-timeout">Timeout per call, seconds (optional; progress extends it)</label>
        <input id="mcp-timeout" ref={timeout} type="number" min="0" step="any" inputMode="decimal" />
        {problem ? (
          <p class="form-error" role="alert">
            {problem}
          </p>
        ) : null}
        <div class="settings-buttons">
          <button type="submit" class="small primary" disabled={busy}>
            Add server
          </button>
        </div>
      </form>
    </div>
  );
}

/**
 * The conversation's settings: one switch a server, on or off for this conversation alone
 * (SetMcpServerEnabled, applied at once; the next model request follows it).
 */
export function McpToggles({
  mcp,
  conversationId,
  authFailed,
}: {
  mcp: McpApi;
  conversationId: string;
  authFailed(message: string): void;
}) {
  const { servers, error, setServers } = useServers(mcp, conversationId, authFailed, true);
  const [problem, setProblem] = useState('');
  if (error)
    return (
      <p class="form-error" role="alert">
        {error}
      </p>
    );
  if (!servers?.length) return null;
  const set = async (name: string, enabled: boolean) => {
    setProblem('');
    try {
      // Idempotent: the same switch sent again changes nothing.
      const res = await mcp.setMcpServerEnabled({ conversationId, name, enabled });
      const changed = res.server;
      setServers((list) => list?.map((s) => (s.name === name && changed ? { ...s, disabled: changed.disabled } : s)) as McpServer[]);
    } catch (err) {
      if (isUnauthenticated(err)) return authFailed(errorText(err));
      setProblem(errorText(err));
    }
  };
  return (
    <fieldset class="checks mcp-toggles" data-testid="mcp-toggles">
      <legend>MCP servers in this conversation</legend>
      {servers.map((s) => (
        <label class="check" for={`mcp-on-${s.name}`} key={s.name}>
          <input
            type="checkbox"
            id={`mcp-on-${s.name}`}
            checked={!s.disabled}
            onChange={(ev) => void set(s.name, (ev.currentTarget as HTMLInputElement).checked)}
          />
          {s.name} <span class="mcp-source">({sourceLabel(s)})</span>
        </label>
      ))}
      {problem ? (
        <p class="form-error" role="alert">
          {problem}
        </p>
      ) : null}
    </fieldset>
  );
}
