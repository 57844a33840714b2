/**
 * The offline demo model: a deterministic "model" that the local Messages API server serves when no API key
 * is set, so people can try every feature (and load-test) without one. It reads the conversation the way a
 * model would — the last user instruction and the tool results since — and answers through the same
 * streaming path as the real API. Its commands (`$ cmd`, `$mcp`, `/write`, `/agents`, `/cut`, …) are listed
 * in docs/llm-gateway.md, "The offline demo model", and in {@link OFFLINE_HELP}.
 */
import type { ApiContentBlock, MessagesRequestBody, ReceivedRequest, Responder, ScriptBlock, ScriptedMessage } from './script.ts';
import { OFFLINE_MAX_OUTPUT_TOKENS } from './validate-request.ts';

export const OFFLINE_MODEL_NAME = 'bedrock-offline';

export const OFFLINE_INTRO = 'I am the Bedrock offline demo model (no ANTHROPIC_API_KEY is set), not a real language model.';

export const OFFLINE_HELP = [
  OFFLINE_INTRO,
  'I follow simple commands so you can try every feature:',
  '- lines starting with `$ ` run each command with the bash tool, in order, then I summarise the outputs;',
  '- `/write PATH` followed by lines of text overwrites PATH with that text (patch tool);',
  '- `/think TEXT` calls the think tool;',
  '- `/upgrade REASON` asks for Unrestricted mode (request_mode_upgrade);',
  "- `/agents TASK | TASK ...` spawns one sub-agent per task (a task's `$ ` lines are run by the sub-agent);",
  '- `/usage N` makes me report N input tokens, to try the context warning (80%) and continuation (90%);',
  '- `/think-long TEXT` thinks at length before answering, when the conversation has thinking on;',
  `- \`/cut PATH\` writes a large generated file in one patch call, which the output limit cuts unless the request allows ${OFFLINE_MAX_OUTPUT_TOKENS} tokens (my limit);`,
  '- `/cut-never` makes a call that is cut at any output limit, to see how I am told about the cut.',
].join('\n');

export interface OfflineModelOptions {
  /** Delay between streamed events, ms, so the demo visibly streams. Default 0. */
  readonly eventDelayMs?: number;
  /** Characters per text delta. Default 12. */
  readonly chunkChars?: number;
}

type Command =
  | { kind: 'bash'; commands: string[] }
  | { kind: 'mcp'; calls: { server: string; tool: string; input: Record<string, unknown> | string }[] }
  | { kind: 'write'; path: string; text: string }
  | { kind: 'think'; thoughts: string }
  | { kind: 'upgrade'; reason: string }
  | { kind: 'agents'; tasks: string[] }
  | { kind: 'think-long'; topic: string }
  | { kind: 'cut'; path: string; always: boolean }
  | { kind: 'usage' }
  | { kind: 'help' };

interface Parsed {
  command: Command;
  inputTokens?: number;
}

/**
 * Parses one user instruction: one command per message, and a `/usage N` line may be added to any of
 * them. Exported for tests and documentation.
 */
export function parseOfflineCommand(text: string): Parsed {
  let inputTokens: number | undefined;
  const lines = text
    .replace(/\r\n/g, '\n')
    .split('\n')
    .filter((line) => {
      const m = /^\s*\/usage\s+(\d+)\s*$/.exec(line);
      if (m) inputTokens = Number(m[1]);
      return !m;
    });
  // The command may follow other text in the same turn (e.g. a synthetic mode-change notice
  // merged into the user's message): take the first line that starts with a slash command.
  const at = lines.findIndex((l) => /^\s*\/(?:(?:write|think-long|think|upgrade|agents|cut)\s+\S|cut-never(?:\s|$))/.test(l));
  const first = at >= 0 ? lines[at]!.trim() : '';
  const after = at >= 0 ? lines.slice(at + 1) : [];
  const rest = (prefix: string) => first.slice(prefix.length).trim();
  let command: Command = { kind: 'help' };
  const mcp = lines.flatMap((l) => {
    const m = /^\$mcp\s+(\S+)\s+(\S+)\s*(.*)$/.exec(l.trim());
    if (!m) return [];
    let input: Record<string, unknown> | string = {};
    if (m[3]!.trim() !== '') {
      try {
        const parsed: unknown = JSON.parse(m[3]!);
        input = parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : 'not a JSON object';
      } catch (err) {
        input = (err as Error).message;
      }
    }
    return [{ server: m[1]!, tool: m[2]!, input }];
  });
  const bash = lines
    .filter((l) => l.startsWith('$ '))
    .map((l) => l.slice(2).trim())
    .filter(Boolean);
  if (first.startsWith('/think-long ')) {
    command = { kind: 'think-long', topic: [rest('/think-long '), ...after].join('\n').trim() };
  } else if (first.startsWith('/cut-never')) {
    command = { kind: 'cut', path: rest('/cut-never') || 'huge.txt', always: true };
  } else if (first.startsWith('/cut ')) {
    command = { kind: 'cut', path: rest('/cut '), always: false };
  } else if (first.startsWith('/write ')) {
    command = { kind: 'write', path: rest('/write '), text: after.join('\n') + (after.length > 0 ? '\n' : '') };
  } else if (first.startsWith('/think ')) {
    command = { kind: 'think', thoughts: [rest('/think '), ...after].join('\n').trim() };
  } else if (first.startsWith('/upgrade ')) {
    command = { kind: 'upgrade', reason: rest('/upgrade ') };
  } else if (first.startsWith('/agents ')) {
    const tasks = rest('/agents ')
      .split('|')
      .map((t) => t.trim())
      .filter(Boolean);
    if (tasks.length) command = { kind: 'agents', tasks };
  } else if (mcp.length > 0) {
    command = { kind: 'mcp', calls: mcp };
  } else if (bash.length > 0) {
    command = { kind: 'bash', commands: bash };
  } else if (inputTokens !== undefined && lines.every((l) => l.trim() === '')) {
    command = { kind: 'usage' };
  }
  return inputTokens === undefined ? { command } : { command, inputTokens };
}

type Msg = MessagesRequestBody['messages'][number];

const blocksOf = (m: Msg): readonly ApiContentBlock[] => (typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content);

/** The opening of the continuation-summary prompt (REQ-BED-020) the conversation service appends to the last user turn. */
export const CONTINUATION_PROMPT_OPENING = 'The conversation context is nearly full.';

/**
 * A continuation-summary request: its last user turn ends with the REQ-BED-020 prompt. From older
 * gateways it is recognised by `tool_choice: {type: 'none'}` instead (offlineReply checks both).
 */
function isContinuationRequest(messages: readonly Msg[]): boolean {
  const last = messages[messages.length - 1];
  if (!last || last.role !== 'user') return false;
  const tail = blocksOf(last).at(-1);
  return tail?.type === 'text' && typeof tail.text === 'string' && tail.text.startsWith(CONTINUATION_PROMPT_OPENING);
}
/** Synthetic notices to the agent (mode changes) start so; they are not the user's words. */
const NOTICE_PREFIX = '[System notice]';
/**
 * The user's own words in a turn. A turn may also carry tool results: after a cancel, the next
 * message shares a user turn with the synthetic results, and it is still an instruction.
 */
const instructionText = (m: Msg) =>
  blocksOf(m)
    .filter((b) => b.type === 'text' && !(b.text ?? '').startsWith(NOTICE_PREFIX))
    .map((b) => b.text ?? '')
    .join('\n');
const isInstruction = (m: Msg) => m.role === 'user' && instructionText(m).trim() !== '';

function resultText(b: ApiContentBlock): string {
  if (typeof b.content === 'string') return b.content;
  return (b.content ?? []).map((c) => c.text ?? '').join('');
}

function clip(text: string, max = 300): string {
  const t = text.trim();
  return t.length <= max ? t : `${Array.from(t).slice(0, max).join('')}…`;
}

/** What the offline model answers to one request. */
export function offlineReply(body: MessagesRequestBody, options: OfflineModelOptions = {}): ScriptedMessage {
  const tools = new Set((body.tools ?? []).map((t) => t.name));
  const toolDefs = (body.tools ?? []) as readonly { name?: string; description?: string }[];
  const messages = body.messages;
  const base = {
    kind: 'message' as const,
    model: OFFLINE_MODEL_NAME,
    eventDelayMs: options.eventDelayMs ?? 0,
    chunkChars: options.chunkChars ?? 12,
  };
  const reply = (content: ScriptBlock[], inputTokens?: number): ScriptedMessage =>
    inputTokens === undefined ? { ...base, content } : { ...base, content, usage: { input_tokens: inputTokens } };

  // A continuation-summary request (REQ-BED-020) offers the conversation's tools but forbids
  // using them: the API rejects a history with tool blocks and no tools.
  if (body.tool_choice?.type === 'none' || isContinuationRequest(messages)) {
    const asked = messages.filter(isInstruction).map((m) => clip(instructionText(m), 80));
    const toolCalls = messages.flatMap((m) =>
      blocksOf(m)
        .filter((b) => b.type === 'tool_use')
        .map((b) => b.name ?? '?'),
    );
    return reply([
      {
        type: 'text',
        text:
          `Session summary (offline demo model): ${asked.length} user message(s), ${toolCalls.length} tool call(s)` +
          (toolCalls.length ? ` (${[...new Set(toolCalls)].join(', ')})` : '') +
          `.\nLast request: ${asked.at(-1) ?? '(none)'}`,
      },
    ]);
  }

  let lastInstruction = -1;
  messages.forEach((m, i) => {
    if (isInstruction(m)) lastInstruction = i;
  });
  const instruction = messages[lastInstruction];
  if (!instruction) return reply([{ type: 'text', text: OFFLINE_HELP }]);
  const parsed = parseOfflineCommand(instructionText(instruction));
  const since = messages.slice(lastInstruction + 1);
  const results = since.flatMap((m) => (m.role === 'user' ? blocksOf(m).filter((b) => b.type === 'tool_result') : []));
  const calls = since.flatMap((m) => (m.role === 'assistant' ? blocksOf(m).filter((b) => b.type === 'tool_use') : []));
  const isSubAgent = tools.has('submit_result');
  const usage = parsed.inputTokens;
  const unavailable = (tool: string) =>
    reply(
      [{ type: 'text', text: `${OFFLINE_INTRO}\nThe ${tool} tool is not offered in this conversation, so I cannot do that here.` }],
      usage,
    );

  // A sub-agent's task: run its `$ ` lines, then submit the result.
  if (isSubAgent) {
    const commands = parsed.command.kind === 'bash' ? parsed.command.commands : [];
    if (calls.some((c) => c.name === 'submit_result')) return reply([{ type: 'text', text: 'Result submitted.' }], usage);
    if (commands.length > 0 && calls.length === 0) {
      return reply([{ type: 'text', text: `Running ${commands.length} command(s) for this task.` }, ...commands.map(bashCall)], usage);
    }
    const failed = results.filter((r) => r.is_error).length;
    const summary = results.length ? summarise(calls, results) : `Nothing to run for this task: ${clip(instructionText(instruction), 200)}`;
    return reply([{ type: 'tool_use', name: 'submit_result', input: { result: summary, success: failed === 0 } }], usage);
  }

  // The tools of this instruction have answered: summarise.
  if (calls.length > 0) {
    return reply([{ type: 'text', text: summarise(calls, results) }], usage);
  }

  const c = parsed.command;
  switch (c.kind) {
    case 'mcp': {
      const blocks: ScriptBlock[] = [];
      for (const call of c.calls) {
        const name = mcpToolOffered(toolDefs, call.server, call.tool);
        if (!name) return unavailable(`MCP ${call.server} ${call.tool}`);
        if (typeof call.input === 'string') {
          return reply([{ type: 'text', text: `The input for ${call.server} ${call.tool} is not a JSON object (${call.input}).` }], usage);
        }
        // A deferred tool is found first with the request's tool search tool, as a real model
        // must (the provider runs the search in the same response).
        const search = deferredSearchTool(body.tools ?? [], name);
        if (search) {
          // Fresh ids: the result takes the id of the server_tool_use just before it.
          blocks.push({ type: 'server_tool_use', name: search, input: { query: `${call.server} ${call.tool}` } });
          blocks.push({
            type: 'tool_search_tool_result',
            content: { type: 'tool_search_tool_search_result', tool_references: [{ type: 'tool_reference', tool_name: name }] },
          });
        }
        blocks.push({ type: 'tool_use', name, input: call.input });
      }
      return reply([{ type: 'text', text: `Calling ${blocks.length} MCP tool(s).` }, ...blocks], usage);
    }
    case 'bash':
      if (!tools.has('bash')) return unavailable('bash');
      return reply([{ type: 'text', text: `Running ${c.commands.length} command(s).` }, ...c.commands.map(bashCall)], usage);
    case 'write':
      if (!tools.has('patch')) return unavailable('patch');
      return reply(
        [{ type: 'tool_use', name: 'patch', input: { path: c.path, patches: [{ operation: 'overwrite', new_text: c.text }] } }],
        usage,
      );
    case 'think':
      if (!tools.has('think')) return unavailable('think');
      return reply([{ type: 'tool_use', name: 'think', input: { thoughts: c.thoughts } }], usage);
    case 'upgrade':
      if (!tools.has('request_mode_upgrade')) return unavailable('request_mode_upgrade');
      return reply([{ type: 'tool_use', name: 'request_mode_upgrade', input: { reason: c.reason } }], usage);
    case 'agents':
      if (!tools.has('spawn_agents')) return unavailable('spawn_agents');
      return reply([{ type: 'tool_use', name: 'spawn_agents', input: { tasks: c.tasks.map((task) => ({ task })) } }], usage);
    case 'think-long':
      return thinkLong(c.topic, thinkingOn(body), reply, usage);
    case 'cut': {
      if (!tools.has('patch')) return unavailable('patch');
      // Told about the cut (a notice in a later user turn): the model would split the work.
      const told = since.some(
        (m) => m.role === 'user' && blocksOf(m).some((b) => b.type === 'text' && (b.text ?? '').startsWith(NOTICE_PREFIX)),
      );
      if (told) {
        return reply(
          [
            {
              type: 'text',
              text: `Understood: my call to write ${c.path} was cut by the output limit. I will split the work into several smaller writes instead of one large call (offline demo model: this is where a real model would do so).`,
            },
          ],
          usage,
        );
      }
      return cutWrite(c.path, c.always, body.max_tokens, base, usage);
    }
    case 'usage':
      return reply([{ type: 'text', text: `Reporting ${usage} input tokens, as asked (offline demo model).` }], usage);
    case 'help':
      return reply([{ type: 'text', text: OFFLINE_HELP }], usage);
  }
}

const thinkingOn = (body: MessagesRequestBody) => body.thinking?.type === 'enabled' || body.thinking?.type === 'adaptive';

/** `/think-long`: several paragraphs of (scripted) thinking, signed by the server, then the answer. */
function thinkLong(
  topic: string,
  on: boolean,
  reply: (content: ScriptBlock[], inputTokens?: number) => ScriptedMessage,
  usage: number | undefined,
): ScriptedMessage {
  const subject = topic || 'the question';
  if (!on) {
    return reply(
      [
        {
          type: 'text',
          text: `Thinking is off for this request, so I answer without a thinking block (offline demo model). On "${subject}": turn thinking on and ask again to see my thinking first.`,
        },
      ],
      usage,
    );
  }
  const thinking = [
    `The user asks me to think at length about "${subject}". I am the offline demo model, so these thoughts are scripted, but they stream, are signed and are sent back exactly like a real model's thinking.`,
    `First, what is being asked. "${subject}" could be read narrowly, as a single question with one answer, or broadly, as an invitation to explore the surrounding trade-offs. A careful answer starts by naming which reading it takes and why.`,
    `Second, what I already know. Anything in the conversation so far constrains the answer: earlier tool results, files written, the mode the conversation runs in. None of it contradicts a direct answer here, so I can keep the answer short.`,
    `Third, the alternatives. I could answer immediately, ask a clarifying question, or run tools to gather facts first. Running tools costs time; asking costs a round trip; answering directly risks being wrong. For a demo, answering directly is the right call.`,
    `Fourth, checking the plan against the thinking rules of the API: this thinking block must be sent back unchanged, with its signature, whenever the conversation continues a tool loop that started after it. Changing a single character would make the signature invalid.`,
    `Finally, the answer itself: acknowledge the topic, say that the thinking above was the demo, and stop.`,
  ].join('\n\n');
  return reply(
    [
      { type: 'thinking', thinking },
      {
        type: 'text',
        text: `After thinking over "${subject}" (offline demo model): the thinking above came as its own signed block before this answer.`,
      },
    ],
    usage,
  );
}

/** Lines of the large file `/cut` and `/cut-never` write. */
export const CUT_FILE_LINES = 2000;

/**
 * `/cut`: a patch overwrite of a large generated file, cut by max_tokens (partial input JSON, no
 * content_block_stop, stop reason max_tokens, output tokens = max_tokens) unless the request
 * allows this model's whole output limit; `always` cuts it at any limit.
 */
function cutWrite(
  path: string,
  always: boolean,
  maxTokens: number,
  base: Omit<ScriptedMessage, 'content'>,
  usage: number | undefined,
): ScriptedMessage {
  const lines = Array.from(
    { length: CUT_FILE_LINES },
    (_, i) => `${i + 1}: generated line ${i + 1} of ${CUT_FILE_LINES}, written in one call to show a tool call cut by the output limit.`,
  );
  const input = { path, patches: [{ operation: 'overwrite', new_text: `${lines.join('\n')}\n` }] };
  const intro: ScriptBlock = { type: 'text', text: `Writing ${path} (${CUT_FILE_LINES} lines) in one patch call.` };
  // Large input: bigger deltas, so the demo does not stream it for minutes.
  const chunkChars = Math.max(base.chunkChars ?? 12, 2048);
  const withUsage = usage === undefined ? {} : { input_tokens: usage };
  if (!always && maxTokens >= OFFLINE_MAX_OUTPUT_TOKENS) {
    return {
      ...base,
      chunkChars,
      content: [intro, { type: 'tool_use', name: 'patch', input }],
      ...(usage === undefined ? {} : { usage: withUsage }),
    };
  }
  const json = JSON.stringify(input);
  // The part of the call the limit let through, in proportion to the limit.
  const partialJsonChars = Math.min(json.length - 16, Math.max(16, Math.floor((json.length * maxTokens) / OFFLINE_MAX_OUTPUT_TOKENS)));
  return {
    ...base,
    chunkChars,
    stopReason: 'max_tokens',
    content: [intro, { type: 'tool_use', name: 'patch', input, partialJsonChars }],
    usage: { ...withUsage, output_tokens: maxTokens },
  };
}

function bashCall(command: string): ScriptBlock {
  return { type: 'tool_use', name: 'bash', input: { command } };
}

function summarise(calls: readonly ApiContentBlock[], results: readonly ApiContentBlock[]): string {
  const lines = calls.map((call, i) => {
    const result = results.find((r) => r.tool_use_id === call.id);
    const input = (call.input ?? {}) as Record<string, unknown>;
    const what = call.name === 'bash' ? `\`${String(input.command)}\`` : (call.name ?? 'tool');
    if (!result) return `${i + 1}. ${what}: no result`;
    const status = result.is_error ? 'failed' : 'ok';
    const out = clip(resultText(result));
    return `${i + 1}. ${what} ${status}${out ? `:\n${out}` : ''}`;
  });
  return `Done (offline demo model). ${calls.length} tool call(s):\n${lines.join('\n')}`;
}

/** The offline model as a responder for the local Messages API server. */
export function offlineModelResponder(options: OfflineModelOptions = {}): Responder {
  return (request: ReceivedRequest) => {
    if (!request.body) return { kind: 'error', status: 400, errorType: 'invalid_request_error', message: 'invalid JSON body' };
    return offlineReply(request.body, options);
  };
}

/**
 * The offered name of tool `tool` of MCP server `server`: `mcp__SERVER__TOOL`, or (a tool name
 * the API does not allow, offered under a changed name) the server's tool whose description
 * names it (`tool "TOOL"`, as the tool-runner describes MCP tools); undefined when not offered.
 */
function mcpToolOffered(tools: readonly { name?: string; description?: string }[], server: string, tool: string): string | undefined {
  const exact = `mcp__${server}__${tool}`;
  if (tools.some((t) => t.name === exact)) return exact;
  return tools.find((t) => t.name?.startsWith(`mcp__${server}__`) && t.description?.includes(`tool "${tool}"`))?.name;
}

/** The request's tool search tool when tool `name` is deferred (defer_loading) behind one; else undefined. */
function deferredSearchTool(tools: readonly unknown[], name: string): string | undefined {
  const defs = tools.filter((t): t is Record<string, unknown> => typeof t === 'object' && t !== null);
  if (defs.find((t) => t.name === name)?.defer_loading !== true) return undefined;
  const search = defs.find((t) => t.name === 'tool_search_tool_bm25' || t.name === 'tool_search_tool_regex');
  return typeof search?.name === 'string' ? search.name : undefined;
}
