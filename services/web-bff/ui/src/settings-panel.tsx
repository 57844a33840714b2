/**
 * A conversation's settings panel (thinking, web tools, MCP servers) and the web-tools checkboxes
 * it shares with the new-conversation form (sidebar.tsx).
 */
import { ThinkingLevel, type Conversation, type ServerTool } from '@bedrock/contracts';
import {
  SERVER_TOOLS,
  serverToolLabel,
  serverToolName,
  settingsSummary,
  THINKING_CHOICES,
  thinkingLabel,
} from '@bedrock/agent-view/agent-content';
import { retrying } from '@bedrock/agent-view/retry';
import { useRef, useState } from 'preact/hooks';
import { errorText, isUnauthenticated } from './api.ts';
import { McpToggles } from './mcp-servers.tsx';
import type { Session } from './session.ts';

/**
 * The "Web tools" fieldset: one checkbox per server tool, with ids `${idPrefix}-<tool>`; `boxes`
 * gets each tool's checkbox. `checked`: the tools ticked at first; `named`: the boxes get form names.
 */
export function ServerToolChecks(props: {
  idPrefix: string;
  boxes: Map<ServerTool, HTMLInputElement>;
  checked?: readonly ServerTool[];
  named?: boolean;
}) {
  return (
    <fieldset class="checks">
      <legend>Web tools</legend>
      {SERVER_TOOLS.map((tool) => (
        <label class="check" for={`${props.idPrefix}-${serverToolName(tool)}`} key={tool}>
          <input
            type="checkbox"
            id={`${props.idPrefix}-${serverToolName(tool)}`}
            {...(props.named ? { name: serverToolName(tool) } : {})}
            {...(props.checked ? { defaultChecked: props.checked.includes(tool) } : {})}
            ref={(el) => {
              if (el) props.boxes.set(tool, el);
            }}
          />
          {serverToolLabel(tool)}
        </label>
      ))}
    </fieldset>
  );
}

/**
 * Thinking, web tools and MCP servers: the summary, and a panel that changes them (the MCP
 * switches apply at once, each its own call). Only what was changed is
 * sent (an unchanged tool list is left out, so a tool the deployment no longer allows does not
 * block a change of thinking); the server's refusal is shown in the panel as it says it.
 */
export function SettingsPanel({ session, conversation: c }: { session: Session; conversation: Conversation }) {
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
        <ServerToolChecks idPrefix="conv" boxes={boxes.current} checked={c.serverTools} />
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
