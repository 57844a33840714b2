/**
 * What a Bedrock conversation looks like in ACP: its messages and live events as `session/update`
 * notifications (UpdateTranslator), a prompt's content blocks as a message, and the state a turn rests
 * in as a stop reason. Pure: no I/O (agent.ts does that). docs/cli.md, "In an editor (ACP)".
 */
import { posix } from 'node:path';
import type * as acp from '@agentclientprotocol/sdk';
import {
  ErrorKind,
  MessageType,
  Mode,
  StateKind,
  StopReason,
  TokenDeltaKind,
  type ConversationEvent,
  type ConversationState,
  type Message,
  type ToolResultBlock,
  type ToolUseBlock,
} from '@bedrock/contracts';
import {
  COMPACTING,
  compactionSummary,
  isRefusalError,
  refusalText,
  serverToolLine,
  serverToolView,
  stopMarker,
} from '@bedrock/agent-view/agent-content';
import { parseJsonObject, patchDisplay, patchHunks, toolLabel, toolSummary } from '@bedrock/agent-view/format';
import { isToolName, type ToolName } from '@bedrock/contracts/tools';

export type SessionUpdate = acp.SessionUpdate;

/**
 * How an editor shows each of Bedrock's tools: ACP's kind (it picks an icon by it) and the title
 * line ("$ ls -la", "Edit src/a.ts", "Ask for write access: …") from the one-line summary. Keyed
 * by every tool of the registry: a new tool fails to compile until it has its entry.
 */
const TOOL_VIEWS: Readonly<Record<ToolName, { readonly kind: acp.ToolKind; readonly title: (summary: string) => string }>> = {
  bash: { kind: 'execute', title: (summary) => summary },
  patch: { kind: 'edit', title: (summary) => `Edit ${summary || '(no path)'}` },
  keyword_search: { kind: 'search', title: (summary) => `Search: ${summary}` },
  think: { kind: 'think', title: () => 'Think' },
  request_mode_upgrade: { kind: 'switch_mode', title: (summary) => `Ask for write access: ${summary}` },
  spawn_agents: { kind: 'other', title: (summary) => `Spawn ${summary}` },
  submit_result: { kind: 'other', title: () => 'Submit the result' },
};

/** ACP's kind of a tool: `other` for one outside the registry (MCP). */
export function toolKind(name: string): acp.ToolKind {
  return isToolName(name) ? TOOL_VIEWS[name].kind : 'other';
}

/** The line an editor shows for a tool call; an MCP tool by its server and name. */
export function toolTitle(name: string, inputJson: string): string {
  // An MCP tool: "fs › read_text_file" (the arguments are the call's raw input).
  return isToolName(name) ? TOOL_VIEWS[name].title(toolSummary(name, inputJson)) : toolLabel(name);
}

const text = (t: string): acp.ContentBlock => ({ type: 'text', text: t });

/** Text in a Markdown code fence longer than any run of backticks in it. */
export function fenced(body: string): string {
  const longest = Math.max(0, ...Array.from(body.matchAll(/`+/g), (m) => m[0].length));
  const fence = '`'.repeat(Math.max(3, longest + 1));
  return `${fence}\n${body.replace(/\n+$/, '')}\n${fence}`;
}

/**
 * The translation of one conversation into session updates: it remembers the tool calls it
 * announced (their names, for the results) and what the current response streamed (so that
 * the persisted message does not repeat it).
 *
 *   agent text, thinking        agent_message_chunk, agent_thought_chunk (streamed deltas; a
 *                               persisted message adds only what was not streamed)
 *   a tool call                 tool_call (pending), tool_call_update in_progress while it runs,
 *                               its output as it streams, completed / failed with its result;
 *                               the patch tool's diff as ACP `diff` content per hunk
 *   the provider's compaction   while it streams, one agent_thought_chunk ("Compacting the
 *                               context…"), never answer text; its persisted block one line of
 *                               agent text (the summary left out)
 *   web searches and fetches,   one line of agent text each (the wording of `bedrock show`)
 *   stop markers, errors
 *   user messages               user_message_chunk (replayed by session/load only: live, the
 *                               editor shows what it sent)
 *   the service's notices       agent text ("Note: …")
 *   mode, title, context usage  current_mode_update (Restricted / Unrestricted as session
 *                               modes), session_info_update, usage_update (and its cost
 *                               when a turn rests)
 *   a denied upgrade request    its tool call ends failed
 */
export class UpdateTranslator {
  private readonly tools = new Map<string, { name: string; input: Record<string, unknown> }>();
  private streamed = { text: false, thinking: false };
  /** The compaction block whose progress was said (`requestId/blockIndex`): said once. */
  private compacting = '';
  /** Live output of the tools running now (ACP replaces a tool call's content: it is sent whole). */
  private readonly output = new Map<string, string>();
  /** The last tool call that asked for write access (what a permission request refers to). */
  upgradeToolCallId: string | undefined;
  /** How the last agent message of the turn ended. */
  lastStop: StopReason = StopReason.UNSPECIFIED;
  /** Upgrade requests the editor denied (their tool calls end failed). */
  readonly denied = new Set<string>();
  /** The context usage last said (usage_update only when it changes). */
  private usage = '';
  /** The title last said. */
  private title = '';
  /** The last message was a refusal: the error message after it is said in the refusal's line. */
  private refused = false;

  constructor(private readonly cwd: string) {}

  /** A persisted message (replayed, or live: `live` leaves out user messages and what streamed). */
  message(m: Message, live: boolean): SessionUpdate[] {
    const refused = this.refused;
    this.refused = false;
    switch (m.type) {
      case MessageType.USER:
        return live ? [] : this.userMessage(m);
      case MessageType.AGENT:
        return this.agentMessage(m);
      case MessageType.TOOL:
        return m.content.flatMap((b) => (b.block.case === 'toolResult' ? [this.toolResult(b.block.value)] : []));
      case MessageType.ERROR:
        // A refusal's error message is said with the refusal.
        if (refused && isRefusalError(textOf(m))) return [];
        return [{ sessionUpdate: 'agent_message_chunk', content: text(`\n\n✗ ${textOf(m)}\n`) }];
      case MessageType.CONTINUATION:
        return [{ sessionUpdate: 'agent_message_chunk', content: text(`Continued from an earlier conversation:\n\n${textOf(m)}\n`) }];
      default:
        // System notices are the model's (mode changes, cuts), said to the user otherwise.
        return [];
    }
  }

  private userMessage(m: Message): SessionUpdate[] {
    return m.content.flatMap((b): SessionUpdate[] => {
      if (b.block.case === 'text') return [{ sessionUpdate: 'user_message_chunk', content: text(b.block.value.text) }];
      if (b.block.case === 'image')
        return [
          {
            sessionUpdate: 'user_message_chunk',
            content: { type: 'image', mimeType: b.block.value.mediaType, data: Buffer.from(b.block.value.data).toString('base64') },
          },
        ];
      // The tool results a cancel left in the user's turn belong to their calls.
      if (b.block.case === 'toolResult') return [this.toolResult(b.block.value)];
      return [];
    });
  }

  private agentMessage(m: Message): SessionUpdate[] {
    const was = this.streamed;
    this.streamed = { text: false, thinking: false };
    const updates: SessionUpdate[] = [];
    for (const b of m.content) {
      switch (b.block.case) {
        case 'text':
          if (!was.text) updates.push({ sessionUpdate: 'agent_message_chunk', content: text(b.block.value.text) });
          break;
        case 'thinking':
          if (!was.thinking && b.block.value.thinking)
            updates.push({ sessionUpdate: 'agent_thought_chunk', content: text(b.block.value.thinking) });
          break;
        case 'redactedThinking':
          if (!was.thinking) updates.push({ sessionUpdate: 'agent_thought_chunk', content: text('(redacted by the provider)') });
          break;
        case 'toolUse':
          updates.push(this.toolCall(b.block.value));
          break;
        case 'serverTool':
          updates.push({
            sessionUpdate: 'agent_message_chunk',
            content: text(`\n${serverToolLine(serverToolView(b.block.value.blockType, b.block.value.blockJson))}\n`),
          });
          break;
        case 'compaction':
          updates.push({ sessionUpdate: 'agent_message_chunk', content: text(`\n⏺ ${compactionSummary(b.block.value.content)}\n`) });
          break;
        case 'image':
        case 'toolResult':
        case undefined:
          break;
        default: {
          const unknown: never = b.block;
          void unknown;
        }
      }
    }
    this.lastStop = m.stopReason;
    this.refused = m.stopReason === StopReason.REFUSAL;
    const marker =
      m.stopReason === StopReason.REFUSAL ? `✗ ${refusalText(m.stopExplanation)}` : stopMarker(m.stopReason, m.stopExplanation);
    if (marker) updates.push({ sessionUpdate: 'agent_message_chunk', content: text(`\n\n${marker}\n`) });
    return updates;
  }

  private toolCall(t: ToolUseBlock): SessionUpdate {
    const input = parseJsonObject(t.inputJson) ?? {};
    this.tools.set(t.id, { name: t.name, input });
    if (t.name === 'request_mode_upgrade') this.upgradeToolCallId = t.id;
    const locations = t.name === 'patch' && typeof input.path === 'string' ? [{ path: this.absolute(input.path) }] : undefined;
    return {
      sessionUpdate: 'tool_call',
      toolCallId: t.id,
      title: toolTitle(t.name, t.inputJson),
      kind: toolKind(t.name),
      status: 'pending',
      rawInput: input,
      ...(locations ? { locations } : {}),
    };
  }

  private toolResult(r: ToolResultBlock): SessionUpdate {
    this.output.delete(r.toolUseId);
    const tool = this.tools.get(r.toolUseId);
    // A denied upgrade is an answer to the agent (not an error to it), but the editor shows the
    // request as refused, not as done.
    const denied = this.denied.has(r.toolUseId) || (tool?.name === 'request_mode_upgrade' && UPGRADE_DENIED.test(r.content));
    const failed = r.isError || r.cancelled || denied;
    const content: acp.ToolCallContent[] = [];
    const display = !failed && tool?.name === 'patch' ? patchDisplay(r.displayJson) : undefined;
    if (display) {
      const path = this.absolute(display.path || String(tool?.input.path ?? ''));
      for (const h of patchHunks(display.diff))
        content.push({ type: 'diff', path, oldText: display.created ? null : h.oldText, newText: h.newText });
    }
    // Without a diff to show (or a diff cut short), the result as the model read it.
    if (content.length === 0 && r.content) content.push({ type: 'content', content: text(fenced(r.content)) });
    return { sessionUpdate: 'tool_call_update', toolCallId: r.toolUseId, status: failed ? 'failed' : 'completed', content };
  }

  /** A live event (not the snapshot): the updates it makes, if any. */
  event(e: ConversationEvent): SessionUpdate[] {
    const k = e.kind;
    switch (k.case) {
      case 'tokenDelta': {
        if (k.value.kind === TokenDeltaKind.COMPACTION) {
          // The provider's summary of the context: progress (the persisted block gets its line).
          const key = `${k.value.requestId}/${k.value.blockIndex}`;
          if (this.compacting === key) return [];
          this.compacting = key;
          return [{ sessionUpdate: 'agent_thought_chunk', content: text(`${COMPACTING}\n`) }];
        }
        const thinking = k.value.kind === TokenDeltaKind.THINKING;
        if (thinking) this.streamed.thinking = true;
        else this.streamed.text = true;
        if (!k.value.text) return [];
        return [{ sessionUpdate: thinking ? 'agent_thought_chunk' : 'agent_message_chunk', content: text(k.value.text) }];
      }
      case 'messagePersisted':
        return k.value.message ? this.message(k.value.message, true) : [];
      case 'stateChanged': {
        const s = k.value.state;
        const updates: SessionUpdate[] = [];
        if (s?.kind === StateKind.TOOL_EXECUTING && s.currentToolUseId)
          updates.push({ sessionUpdate: 'tool_call_update', toolCallId: s.currentToolUseId, status: 'in_progress' });
        const u = k.value.contextUsage;
        if (u && u.contextWindow > 0n) updates.push(...this.usageUpdate(Number(u.usedTokens), Number(u.contextWindow)));
        return updates;
      }
      case 'modeChanged':
        return [{ sessionUpdate: 'current_mode_update', currentModeId: modeId(k.value.mode) }];
      case 'titleChanged':
        return this.titleUpdate(k.value.title);
      case 'historyRewound':
        // ACP cannot take shown messages back: the client is told in words.
        return [
          {
            sessionUpdate: 'agent_message_chunk',
            content: text(`\n\nNote: the history was rewound; the messages after #${k.value.through} were removed.\n\n`),
          },
        ];
      case 'notice':
        // The service's word to the user (thinking left out, a limit): said as the agent's text.
        return k.value.text ? [{ sessionUpdate: 'agent_message_chunk', content: text(`\n\nNote: ${k.value.text}\n\n`) }] : [];
      case 'toolOutput': {
        // The tail of what it printed so far (the result, when it comes, is the truth).
        const all = (this.output.get(k.value.toolUseId) ?? '') + k.value.text;
        const kept = all.length > LIVE_OUTPUT_CHARS ? all.slice(-LIVE_OUTPUT_CHARS) : all;
        this.output.set(k.value.toolUseId, kept);
        return [
          {
            sessionUpdate: 'tool_call_update',
            toolCallId: k.value.toolUseId,
            status: 'in_progress',
            content: [{ type: 'content', content: text(fenced(kept)) }],
          },
        ];
      }
      case 'modeUpgradeRequested':
        if (k.value.toolUseId) this.upgradeToolCallId = k.value.toolUseId;
        return [];
      case 'contextExhausted':
        return [
          {
            sessionUpdate: 'agent_message_chunk',
            content: text('\n\n⋯ The context is full: continue in a new conversation (`bedrock new --from ID`).\n'),
          },
        ];
      default:
        return [];
    }
  }

  /** The session's title for the editor; nothing when it is the one last said (or none yet). */
  titleUpdate(title: string): SessionUpdate[] {
    if (!title || title === this.title) return [];
    this.title = title;
    return [{ sessionUpdate: 'session_info_update', title }];
  }

  /** How full the context is (and, when known, what the session cost so far); nothing when unchanged. */
  usageUpdate(used: number, size: number, costMicros?: bigint): SessionUpdate[] {
    const key = `${used}/${size}/${costMicros ?? ''}`;
    if (key === this.usage) return [];
    this.usage = key;
    return [
      {
        sessionUpdate: 'usage_update',
        used,
        size,
        ...(costMicros !== undefined ? { cost: { amount: Number(costMicros) / 1e6, currency: 'USD' } } : {}),
      },
    ];
  }

  private absolute(path: string): string {
    return posix.isAbsolute(path) ? path : posix.join(this.cwd, path);
  }
}

/** The conversation service's answer to a denied upgrade (UPGRADE_DENIED). */
const UPGRADE_DENIED = /^The user denied the upgrade\b/;

/** Bedrock's modes as ACP session modes: Restricted (read-only, sandboxed) and Unrestricted. */
export const RESTRICTED = 'restricted';
export const UNRESTRICTED = 'unrestricted';

export function modeId(mode: Mode): string {
  return mode === Mode.UNRESTRICTED ? UNRESTRICTED : RESTRICTED;
}

/** The session's modes for session/new and session/load: the editor shows them and may switch back to Restricted. */
export function sessionModes(mode: Mode): acp.SessionModeState {
  return {
    currentModeId: modeId(mode),
    availableModes: [
      {
        id: RESTRICTED,
        name: 'Restricted',
        description: 'Read-only: the files cannot be changed, bash runs in a kernel sandbox with no network',
      },
      {
        id: UNRESTRICTED,
        name: 'Unrestricted',
        description: 'Full access: files and network. Granted when the agent asks for it and you allow it',
      },
    ],
  };
}

/** The permission request's title: one sentence, with the agent's reason when it gave one. */
export function upgradeTitle(reason: string, access?: { place: string; warning: string | null }): string {
  const why = reason.trim().replace(/[.!?\s]+$/, '');
  const where = access ? ` in ${access.place}` : '';
  const warning = access?.warning ? ` Warning: ${access.warning}` : '';
  return `The agent asks for write access${where} (Unrestricted mode)${why ? `: ${why}` : ''}. Allow it?${warning}`;
}

/** How much of a running tool's output an editor is sent, from the end. */
export const LIVE_OUTPUT_CHARS = 32_000;

function textOf(m: Message): string {
  return m.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n');
}

/** Thrown for a turn that ended in the ERROR state (not a refusal, not a cancel): the prompt's error. */
export class TurnFailed extends Error {}

/**
 * The stop reason of a turn that came to rest in `state` (`lastStop`: how its last agent
 * message ended). A cancel asked for by the editor is `cancelled` whatever the state says.
 */
export function stopReasonOf(state: ConversationState, lastStop: StopReason, cancelled: boolean): acp.StopReason {
  if (cancelled) return 'cancelled';
  switch (state.kind) {
    case StateKind.CONTEXT_EXHAUSTED:
      return 'max_tokens';
    case StateKind.ERROR:
    case StateKind.FAILED:
      if (state.errorKind === ErrorKind.REFUSED) return 'refusal';
      if (state.errorKind === ErrorKind.CANCELLED) return 'cancelled';
      throw new TurnFailed(state.errorMessage || 'the turn ended in an error');
    default:
      if (lastStop === StopReason.REFUSAL) return 'refusal';
      if (lastStop === StopReason.MAX_TOKENS) return 'max_tokens';
      return 'end_turn';
  }
}

/** Image types the public API accepts (SendMessage's ImageAttachment). */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

/**
 * A prompt's content as one Bedrock message: text as it is; a resource link as a Markdown link;
 * an embedded text resource as its text under its URI; images (PNG, JPEG, GIF, WebP) attached.
 * Anything else is refused with the reason (thrown as a string).
 */
export function promptMessage(prompt: readonly acp.ContentBlock[]): { text: string; images: { mediaType: string; data: Uint8Array }[] } {
  const parts: string[] = [];
  const images: { mediaType: string; data: Uint8Array }[] = [];
  for (const b of prompt) {
    switch (b.type) {
      case 'text':
        parts.push(b.text);
        break;
      case 'resource_link':
        parts.push(`[@${b.name}](${b.uri})`);
        break;
      case 'resource':
        if ('text' in b.resource) parts.push(`${b.resource.uri}:\n${fenced(b.resource.text)}`);
        else if (b.resource.mimeType && IMAGE_TYPES.has(b.resource.mimeType))
          images.push({ mediaType: b.resource.mimeType, data: Buffer.from(b.resource.blob, 'base64') });
        else throw new PromptRefused(`${b.resource.uri}: only text resources and images can be sent`);
        break;
      case 'image':
        if (!IMAGE_TYPES.has(b.mimeType)) throw new PromptRefused(`an image of type ${b.mimeType}: only PNG, JPEG, GIF and WebP`);
        images.push({ mediaType: b.mimeType, data: Buffer.from(b.data, 'base64') });
        break;
      default:
        throw new PromptRefused(`${b.type} content cannot be sent to Bedrock`);
    }
  }
  return { text: parts.join('\n\n'), images };
}

/** A prompt the public API cannot take (an invalid-params error). */
export class PromptRefused extends Error {}
