/** Human-readable output: the agent's text and tool activity on stdout, state lines on stderr. */
import { toJson } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  MessageType,
  Mode,
  StateKind,
  type Conversation,
  type ConversationEvent,
  type ConversationState,
  type Message,
} from '@bedrock/contracts';

export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export const stdio: Output = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};

export function ndjson(event: ConversationEvent): string {
  return `${JSON.stringify(toJson(ConversationEventSchema, event))}\n`;
}

export function stateName(kind: StateKind | undefined): string {
  return (StateKind[kind ?? StateKind.UNSPECIFIED] ?? 'UNKNOWN').toLowerCase();
}

export function modeName(mode: Mode): string {
  return (Mode[mode] ?? 'UNSPECIFIED').toLowerCase();
}

/** "running tool 2 of 3: bash", "retrying in 4s (attempt 2 of 3)", ... */
export function describeState(state: ConversationState | undefined): string {
  if (!state) return 'unknown';
  switch (state.kind) {
    case StateKind.LLM_REQUESTING:
      return state.attempt > 1 ? `thinking (attempt ${state.attempt} of ${state.maxAttempts})` : 'thinking';
    case StateKind.AWAITING_LLM:
      return state.retryDelayMs > 0n
        ? `retrying in ${Number(state.retryDelayMs) / 1000}s (attempt ${state.attempt} of ${state.maxAttempts})`
        : 'waiting for the model';
    case StateKind.TOOL_EXECUTING:
      return `running tool ${state.toolIndex} of ${state.toolCount}: ${state.currentToolName}`;
    case StateKind.AWAITING_SUB_AGENTS:
      return `waiting for ${state.pendingSubAgentIds.length} of ${state.subAgentCount} sub-agents`;
    case StateKind.AWAITING_MODE_APPROVAL:
      return `asks for write access: ${state.upgradeReason}`;
    case StateKind.ERROR:
    case StateKind.FAILED:
      return `${stateName(state.kind)}: ${state.errorMessage}`;
    default:
      return stateName(state.kind);
  }
}

function short(text: string, max = 200): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** One message as transcript lines. */
export function renderMessage(m: Message): string {
  const lines: string[] = [];
  const who = (MessageType[m.type] ?? 'message').toLowerCase();
  for (const block of m.content) {
    switch (block.block.case) {
      case 'text':
        lines.push(`${who}: ${block.block.value.text}`);
        break;
      case 'image':
        lines.push(`${who}: [image ${block.block.value.mediaType}, ${block.block.value.data.length} bytes]`);
        break;
      case 'toolUse':
        lines.push(`tool ${block.block.value.name} ${short(block.block.value.inputJson)}`);
        break;
      case 'toolResult': {
        const r = block.block.value;
        const tag = r.cancelled ? 'cancelled' : r.isError ? 'error' : 'ok';
        lines.push(`  → ${tag}: ${short(r.content)}`);
        break;
      }
      default:
        break;
    }
  }
  return lines.map((l) => `${l}\n`).join('');
}

export function renderConversationLine(c: Conversation): string {
  const updated = c.updatedAt ? new Date(Number(c.updatedAt.seconds) * 1000).toISOString().replace('.000Z', 'Z') : '';
  return `${c.id}  ${stateName(c.state?.kind).padEnd(22)} ${modeName(c.mode).padEnd(12)} ${updated}  ${c.cwd}\n`;
}

/** Live rendering of watch events for people. */
export function createEventRenderer(output: Output): (event: ConversationEvent) => void {
  let streaming = false;
  const endStream = () => {
    if (streaming) output.out('\n');
    streaming = false;
  };
  return (event) => {
    const k = event.kind;
    switch (k.case) {
      case 'tokenDelta':
        streaming = true;
        output.out(k.value.text);
        break;
      case 'toolOutput':
        output.err(k.value.text);
        break;
      case 'messagePersisted': {
        const m = k.value.message!;
        if (m.type === MessageType.AGENT) {
          // The text was streamed already; show the tool calls it makes.
          const hadStream = streaming;
          endStream();
          for (const b of m.content) {
            if (b.block.case === 'toolUse') output.out(`⏺ ${b.block.value.name} ${short(b.block.value.inputJson)}\n`);
            else if (b.block.case === 'text' && !hadStream) output.out(`${b.block.value.text}\n`);
          }
        } else if (m.type === MessageType.TOOL) {
          endStream();
          output.out(renderMessage(m));
        } else if (m.type === MessageType.ERROR || m.type === MessageType.CONTINUATION) {
          endStream();
          output.out(renderMessage(m));
        }
        break;
      }
      case 'stateChanged':
        endStream();
        output.err(`· ${describeState(k.value.state)}\n`);
        break;
      case 'retryScheduled':
        endStream();
        output.err(`· ${k.value.errorMessage}: retrying in ${Number(k.value.delayMs) / 1000}s (attempt ${k.value.attempt} of ${k.value.maxAttempts})\n`);
        break;
      case 'modeUpgradeRequested':
        endStream();
        output.err(`· the agent asks for write access: ${k.value.reason}\n`);
        break;
      case 'modeChanged':
        output.err(`· mode: ${modeName(k.value.mode)}\n`);
        break;
      case 'contextWarning': {
        const u = k.value.contextUsage;
        if (u && u.contextWindow > 0n) output.err(`· context ${Math.round((Number(u.usedTokens) / Number(u.contextWindow)) * 100)}% full\n`);
        break;
      }
      case 'contextExhausted':
        endStream();
        output.err('· context exhausted: continue with `bedrock new --from ID`\n');
        break;
      case 'subAgentProgress':
        output.err(`· sub-agent ${k.value.subAgentId} ${stateName(k.value.state)} (${k.value.finishedCount}/${k.value.totalCount} done)\n`);
        break;
      case 'snapshot':
      case 'heartbeat':
      default:
        break;
    }
  };
}
