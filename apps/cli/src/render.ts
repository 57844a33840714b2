/**
 * Human-readable output of a conversation's live events (watch, send, chat): the agent's text
 * and tool activity on stdout, state lines on stderr; `ndjson` for --json. The pieces are beside
 * it: render-messages.ts, render-tool-output.ts, render-conversation.ts, render-style.ts.
 */
import { toJson } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  MessageType,
  StopReason,
  TokenDeltaKind,
  type ConversationEvent,
  type ConversationState,
  type Message,
} from '@bedrock/contracts';
import {
  citationSources,
  COMPACTING,
  isRefusalError,
  refusalText,
  refusalWithError,
  serverToolView,
  SourceNumbers,
} from '@bedrock/agent-view/agent-content';
import { safeOutput, type Output } from './output.ts';
import { describeState, modeName, stateName } from './render-conversation.ts';
import { compactionLine, footnotes, renderMessage, serverToolText, short, stopLine, textOf, thinkingLines } from './render-messages.ts';
import { dim, paint, type RenderOptions } from './render-style.ts';
import { foldOutput, LiveOutput, resultLine, toolResultLines } from './render-tool-output.ts';
import { cleanStrings } from './terminal-text.ts';

export { stdio, type Output } from './output.ts';

export function ndjson(event: ConversationEvent): string {
  return `${JSON.stringify(toJson(ConversationEventSchema, event))}\n`;
}

/** Renders watch events for people; remembers the last state it was told and the last state line it printed. */
export interface EventRenderer {
  (event: ConversationEvent): void;
  readonly lastState: ConversationState | undefined;
  /** The text of the last `· state` line printed (so that a caller does not print it again). */
  readonly saidState: string | undefined;
}

/** Live rendering of watch events for people. */
export function createEventRenderer(given: Output, options: RenderOptions = {}): EventRenderer {
  const output = safeOutput(given);
  let lastState: ConversationState | undefined;
  let saidState: string | undefined;
  /** Live output of the tools running now, by tool use id. */
  const live = new Map<string, LiveOutput>();
  const note = (text: string) => output.err(`${paint(options.errColor, 'dim', `· ${text}`)}\n`);
  /** What is streaming now: a line is open on stdout. */
  let streaming: 'text' | 'thinking' | undefined;
  let streamBlock = -1;
  /** What the current response streamed (its persisted message need not print it again). */
  let streamed = { text: false, thinking: false };
  /** The compaction block whose progress note was said (`requestId/blockIndex`): said once. */
  let compacting = '';
  /** A refused agent message whose marker waits for the error message that says why (said once). */
  let refused: Message | undefined;
  const endStream = () => {
    if (streaming) output.out('\n');
    streaming = undefined;
  };
  const flushRefusal = () => {
    if (refused) output.out(`${paint(options.color, 'red', '✗')} ${refusalText(refused.stopExplanation)}\n`);
    refused = undefined;
  };
  const render = (raw: ConversationEvent) => {
    const event = cleanStrings(raw);
    const k = event.kind;
    if (refused && !(k.case === 'messagePersisted' && k.value.message?.type === MessageType.ERROR)) flushRefusal();
    switch (k.case) {
      case 'tokenDelta': {
        if (k.value.kind === TokenDeltaKind.COMPACTION) {
          // The provider's summary of the context: progress, not answer text (its persisted block gets a line).
          const key = `${k.value.requestId}/${k.value.blockIndex}`;
          if (compacting !== key) {
            endStream();
            note(COMPACTING);
          }
          compacting = key;
          break;
        }
        const thinking = k.value.kind === TokenDeltaKind.THINKING;
        if (thinking) {
          streamed.thinking = true;
          if (options.hideThinking) break;
          if (streaming !== 'thinking' || streamBlock !== k.value.blockIndex) {
            endStream();
            output.out(`${dim('thinking:', options)}\n`);
          }
          output.out(dim(k.value.text, options));
        } else {
          streamed.text = true;
          // The answer starts on a line of its own after thinking.
          if (streaming === 'thinking') endStream();
          output.out(k.value.text);
        }
        streaming = thinking ? 'thinking' : 'text';
        streamBlock = k.value.blockIndex;
        break;
      }
      case 'toolOutput': {
        endStream();
        let out = live.get(k.value.toolUseId);
        if (!out) {
          out = new LiveOutput((line) => output.out(`${line}\n`), options);
          live.set(k.value.toolUseId, out);
        }
        out.add(k.value.text);
        break;
      }
      case 'messagePersisted': {
        const m = k.value.message!;
        if (m.type === MessageType.AGENT) {
          // What streamed is not printed again; the rest (tool calls, web searches, sources, how it ended) is.
          const was = streamed;
          streamed = { text: false, thinking: false };
          endStream();
          const numbers = new SourceNumbers();
          for (const b of m.content) {
            const thinking = was.thinking ? undefined : thinkingLines(b, options);
            if (thinking) output.out(thinking.map((l) => `${l}\n`).join(''));
            else if (b.block.case === 'toolUse')
              output.out(
                `${paint(options.color, 'cyan', '⏺')} ${paint(options.color, 'bold', b.block.value.name)} ${short(b.block.value.inputJson)}\n`,
              );
            else if (b.block.case === 'compaction') output.out(`${compactionLine(b.block.value.content, options)}\n`);
            else if (b.block.case === 'serverTool')
              output.out(`${serverToolText(serverToolView(b.block.value.blockType, b.block.value.blockJson))}\n`);
            else if (b.block.case === 'text') {
              const marks = [...new Set(citationSources(b.block.value.citationsJson).map((c) => numbers.number(c)))]
                .map((n) => `[${n}]`)
                .join('');
              if (!was.text) output.out(`${b.block.value.text}${marks ? ` ${marks}` : ''}\n`);
            }
          }
          const notes = footnotes(numbers);
          if (notes.length) output.out(notes.map((l) => `${l}\n`).join(''));
          if (m.stopReason === StopReason.REFUSAL) refused = m;
          else {
            const marker = stopLine(m, options);
            if (marker) output.out(`${marker}\n`);
          }
        } else if (m.type === MessageType.TOOL) {
          endStream();
          for (const b of m.content) {
            if (b.block.case !== 'toolResult') continue;
            const r = b.block.value;
            const streamedOutput = live.get(r.toolUseId);
            if (!streamedOutput) {
              output.out(
                toolResultLines(r, options)
                  .map((l) => `${l}\n`)
                  .join(''),
              );
              continue;
            }
            // The output was printed as it came: the result says only what it adds ("[Exit code 3.]").
            streamedOutput.finish();
            live.delete(r.toolUseId);
            const added = r.content.startsWith(streamedOutput.text) ? r.content.slice(streamedOutput.text.length).trim() : '';
            const lines = added.includes('\n') ? [...foldOutput(added, options), resultLine(r, options)] : [resultLine(r, options, added)];
            output.out(lines.map((l) => `${l}\n`).join(''));
          }
        } else if (m.type === MessageType.ERROR && refused) {
          endStream();
          const agent = refused;
          refused = undefined;
          const cross = paint(options.color, 'red', '✗');
          if (isRefusalError(textOf(m))) output.out(`${cross} ${refusalWithError(agent.stopExplanation, textOf(m))}\n`);
          else output.out(`${cross} ${refusalText(agent.stopExplanation)}\n${renderMessage(m, options)}`);
        } else if (m.type === MessageType.ERROR || m.type === MessageType.CONTINUATION || m.type === MessageType.SYSTEM) {
          endStream();
          output.out(renderMessage(m, options));
        }
        break;
      }
      case 'stateChanged': {
        endStream();
        lastState = k.value.state;
        // The same state said again (a retry's attempt counter, a repeat after a resume) is one line.
        const said = describeState(k.value.state);
        if (said !== saidState) note(said);
        saidState = said;
        break;
      }
      case 'retryScheduled':
        endStream();
        note(
          `${k.value.errorMessage}: retrying in ${Number(k.value.delayMs) / 1000}s (attempt ${k.value.attempt} of ${k.value.maxAttempts})`,
        );
        break;
      case 'modeUpgradeRequested':
        endStream();
        note(`the agent asks for write access: ${k.value.reason}`);
        break;
      case 'modeChanged':
        note(`mode: ${modeName(k.value.mode)}`);
        break;
      case 'contextWarning': {
        const u = k.value.contextUsage;
        if (u && u.contextWindow > 0n) note(`context ${Math.round((Number(u.usedTokens) / Number(u.contextWindow)) * 100)}% full`);
        break;
      }
      case 'contextExhausted':
        endStream();
        note('context exhausted: continue with `bedrock new --from ID`');
        break;
      case 'notice':
        // For the user only (the model never sees it), e.g. thinking left out of a tool loop.
        endStream();
        note(k.value.text);
        break;
      case 'historyRewound':
        // RewindConversation cut the history: what was printed after the kept message is gone.
        endStream();
        note(`history rewound: messages after #${k.value.through} were removed; new ones are numbered from #${k.value.through + 1n}`);
        break;
      case 'subAgentProgress':
        note(`sub-agent ${k.value.subAgentId} ${stateName(k.value.state)} (${k.value.finishedCount}/${k.value.totalCount} done)`);
        break;
      case 'snapshot':
      case 'heartbeat':
      default:
        break;
    }
  };
  return Object.defineProperties(render, {
    lastState: { get: () => lastState },
    saidState: { get: () => saidState },
  }) as EventRenderer;
}
