/**
 * The CLI's output for people (src/render*.ts) and its settings flags, without a server:
 * thinking under its label (dimmed only on a terminal, or left out), the provider's tools one
 * line each, the provider's compaction one marked line (its summary left out, progress on
 * stderr while it streams), cited sources as footnotes, and the one-line markers of cut, paused and declined
 * answers (a refusal and the error message after it said once).
 */
import { describe, expect, it } from '@jest/globals';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  ConversationSchema,
  MessageSchema,
  MessageType,
  Mode,
  ServerTool,
  StateKind,
  StopReason,
  ThinkingLevel,
  TokenDeltaKind,
} from '@bedrock/contracts';
import { parseSettingsFlags } from '../src/commands-settings.ts';
import { createEventRenderer } from '../src/render.ts';
import { renderConversationTable, renderMode, renderSettings } from '../src/render-conversation.ts';
import { renderMessages } from '../src/render-messages.ts';
import type { RenderOptions } from '../src/render-style.ts';
import { run } from '../src/run.ts';

type MessageInit = Exclude<MessageInitShape<typeof MessageSchema>, { $typeName: string }>;
type EventKind = Exclude<MessageInitShape<typeof ConversationEventSchema>, { $typeName: string }>['kind'];

const message = (init: MessageInit) => create(MessageSchema, init);
const event = (kind: EventKind) => create(ConversationEventSchema, { conversationId: 'c', kind });
const thinkingDelta = (text: string, blockIndex = 0): EventKind => ({
  case: 'tokenDelta',
  value: { requestId: 'r', text, blockIndex, kind: TokenDeltaKind.THINKING },
});
const textDelta = (text: string, blockIndex = 1): EventKind => ({
  case: 'tokenDelta',
  value: { requestId: 'r', text, blockIndex, kind: TokenDeltaKind.TEXT },
});
const persisted = (init: MessageInit): EventKind => ({ case: 'messagePersisted', value: { message: init } });
const text = (t: string, citations?: unknown[]) => ({
  block: { case: 'text' as const, value: { text: t, citationsJson: citations ? JSON.stringify(citations) : '' } },
});
const thinking = (t: string) => ({ block: { case: 'thinking' as const, value: { thinking: t, signature: 'c2ln' } } });
const serverTool = (json: Record<string, unknown>) => ({
  block: { case: 'serverTool' as const, value: { blockType: String(json.type), blockJson: JSON.stringify(json) } },
});

/** Runs events through a renderer, returning what went to stdout and stderr. */
function rendered(kinds: EventKind[], options: RenderOptions = {}): { out: string; err: string } {
  let out = '';
  let err = '';
  const render = createEventRenderer({ out: (t) => void (out += t), err: (t) => void (err += t) }, options);
  for (const k of kinds) render(event(k));
  return { out, err };
}

const SOURCE = { url: 'https://en.wikipedia.org/wiki/Bedrock', title: 'Bedrock - Wikipedia' };
const cite = { type: 'web_search_result_location', ...SOURCE, encrypted_index: 'eA==', cited_text: 'Bedrock is' };
const searchBlocks = [
  serverTool({ type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'what is bedrock' } }),
  serverTool({
    type: 'web_search_tool_result',
    tool_use_id: 'srvtoolu_1',
    content: [{ type: 'web_search_result', ...SOURCE, encrypted_content: 'ZQ==' }],
  }),
  text('Bedrock is solid rock.', [cite]),
];

describe('the mode in show', () => {
  it('says where Unrestricted tools write, not "full access"', () => {
    expect(renderMode({ mode: Mode.UNRESTRICTED, sandboxAvailable: true, workspaceName: 'api', cwd: '/w/api' })).toBe(
      'unrestricted (writes files in the workspace api (as its tool user may) and uses the network)',
    );
    expect(renderMode({ mode: Mode.UNRESTRICTED, sandboxAvailable: true, workspaceName: '', cwd: '/srv/project' })).toBe(
      'unrestricted (writes files in /srv/project (as its tool user may) and uses the network)',
    );
    expect(renderMode({ mode: Mode.RESTRICTED, sandboxAvailable: true })).toBe('restricted (read-only, sandboxed)');
  });
});

describe('thinking in the live output', () => {
  const turn = [
    thinkingDelta('Let me '),
    thinkingDelta('think.'),
    textDelta('Thought it '),
    textDelta('through.'),
    persisted({
      id: 'a1',
      type: MessageType.AGENT,
      content: [thinking('Let me think.'), text('Thought it through.')],
      stopReason: StopReason.END_TURN,
    }),
  ];

  it('is printed under a label, plain when not on a terminal, and not again when its message is persisted', () => {
    expect(rendered(turn).out).toBe('thinking:\nLet me think.\nThought it through.\n');
  });

  it('is dimmed on a terminal (ANSI dim), the answer is not', () => {
    expect(rendered(turn, { color: true }).out).toBe(
      '\x1b[2mthinking:\x1b[22m\n\x1b[2mLet me \x1b[22m\x1b[2mthink.\x1b[22m\nThought it through.\n',
    );
  });

  it('is left out with --hide-thinking', () => {
    expect(rendered(turn, { hideThinking: true }).out).toBe('Thought it through.\n');
  });

  it('that was not streamed (a watch that joined late) is printed from the message; redacted and hidden thinking are named', () => {
    const out = rendered([
      persisted({
        id: 'a1',
        type: MessageType.AGENT,
        content: [
          thinking('Plan:\nread the file.'),
          { block: { case: 'redactedThinking', value: { data: 'ZW5j' } } },
          thinking(''),
          text('Done.'),
        ],
      }),
    ]).out;
    expect(out).toBe('thinking:\n  Plan:\n  read the file.\nthinking:\n  (redacted by the provider)\nthinking:\n  (not shown)\nDone.\n');
  });
});

describe('web tools and citations', () => {
  it('prints each server-tool block as one line and the cited sources as footnotes', () => {
    const out = rendered([persisted({ id: 'a1', type: MessageType.AGENT, content: searchBlocks, stopReason: StopReason.END_TURN })]).out;
    expect(out).toBe(
      [
        '⏺ searched: what is bedrock',
        '  → 1 result: Bedrock - Wikipedia',
        'Bedrock is solid rock. [1]',
        `  [1] Bedrock - Wikipedia ${SOURCE.url}`,
        '',
      ].join('\n'),
    );
  });

  it('says a fetch and its failure in one line each', () => {
    const out = rendered([
      persisted({
        id: 'a1',
        type: MessageType.AGENT,
        content: [
          serverTool({ type: 'server_tool_use', id: 'srvtoolu_2', name: 'web_fetch', input: { url: 'https://example.com/a' } }),
          serverTool({
            type: 'web_fetch_tool_result',
            tool_use_id: 'srvtoolu_2',
            content: { type: 'web_fetch_tool_result_error', error_code: 'url_not_accessible' },
          }),
        ],
      }),
    ]).out;
    expect(out).toBe('⏺ fetched: https://example.com/a\n  → web fetch failed: the page could not be reached\n');
  });

  it('adds footnotes after streamed text too', () => {
    const out = rendered([
      textDelta('Bedrock is solid rock.', 2),
      persisted({ id: 'a1', type: MessageType.AGENT, content: searchBlocks }),
    ]).out;
    expect(out).toBe(
      [
        'Bedrock is solid rock.',
        '⏺ searched: what is bedrock',
        '  → 1 result: Bedrock - Wikipedia',
        `  [1] Bedrock - Wikipedia ${SOURCE.url}`,
        '',
      ].join('\n'),
    );
  });
});

describe('compaction', () => {
  const SUMMARY = 'The user asked to fix the parser; tests pass.';
  const compaction = (content: string) => ({
    block: {
      case: 'compaction' as const,
      value: { content, blockJson: JSON.stringify({ type: 'compaction', content, encrypted_content: 'ZQ==' }) },
    },
  });
  const compactionDelta = (t: string, blockIndex = 0): EventKind => ({
    case: 'tokenDelta',
    value: { requestId: 'r', text: t, blockIndex, kind: TokenDeltaKind.COMPACTION },
  });

  it('streams as progress on stderr, never as answer text; the persisted block is one marked line', () => {
    const { out, err } = rendered([
      compactionDelta(SUMMARY.slice(0, 10)),
      compactionDelta(SUMMARY.slice(10)),
      textDelta('Fixed.'),
      persisted({ id: 'a', type: MessageType.AGENT, content: [compaction(SUMMARY), text('Fixed.')], stopReason: StopReason.END_TURN }),
    ]);
    expect(out).toBe('Fixed.\n⏺ context compacted by the provider (summary: 9 words)\n');
    expect(out).not.toContain('parser');
    expect(err).toBe('· Compacting the context…\n');
  });

  it('show: a marked line (dimmed on a terminal), the summary left out; an empty summary is named', () => {
    const messages = [
      message({ id: 'a', type: MessageType.AGENT, content: [compaction(SUMMARY), text('Fixed.')], stopReason: StopReason.END_TURN }),
    ];
    expect(renderMessages(messages)).toBe('⏺ context compacted by the provider (summary: 9 words)\nagent: Fixed.\n');
    expect(renderMessages(messages, { color: true })).toContain('\x1b[2m⏺ context compacted by the provider (summary: 9 words)\x1b[22m');
    expect(renderMessages([message({ id: 'b', type: MessageType.AGENT, content: [compaction('')] })])).toBe(
      '⏺ context compacted by the provider (no summary returned)\n',
    );
  });
});

describe('how an answer ended', () => {
  it('marks a cut and a pause with one line each; the cut notice shows', () => {
    const out = rendered([
      persisted({ id: 'a1', type: MessageType.AGENT, content: [text('Part one')], stopReason: StopReason.MAX_TOKENS }),
      persisted({
        id: 's1',
        type: MessageType.SYSTEM,
        content: [text('Your response was cut by the output limit. Continue where it stopped.')],
      }),
      persisted({ id: 'a2', type: MessageType.AGENT, content: [searchBlocks[0]!], stopReason: StopReason.PAUSE_TURN }),
    ]).out;
    expect(out).toBe(
      [
        'Part one',
        '⋯ Cut by the output limit — continued below.',
        'system: Your response was cut by the output limit. Continue where it stopped.',
        '⏺ searched: what is bedrock',
        '⋯ Paused by the provider — continued below.',
        '',
      ].join('\n'),
    );
  });

  it('says a refusal once: with the error message that follows it, or alone', () => {
    const refused = persisted({
      id: 'a1',
      type: MessageType.AGENT,
      content: [text('I')],
      stopReason: StopReason.REFUSAL,
      stopExplanation: 'It asks for harm.',
    });
    const error = persisted({
      id: 'e1',
      type: MessageType.ERROR,
      content: [text('The model declined to answer: It asks for harm. Rephrase your request or send a new message.')],
    });
    const idle: EventKind = { case: 'stateChanged', value: { state: { kind: 1 } } };
    expect(rendered([refused, error, idle]).out).toBe(
      'I\n✗ The model declined to answer: It asks for harm. Rephrase your request or send a new message.\n',
    );
    // No error message after it (an older service): the marker with the explanation.
    expect(rendered([refused, idle]).out).toBe('I\n✗ The model declined to answer: It asks for harm.\n');
  });
});

describe('notices for the user', () => {
  it('prints a notice as a status line on stderr (not part of the answer)', () => {
    const notice = 'Thinking was left out of this request: the API takes no thinking here.';
    const { out, err } = rendered([textDelta('Working'), { case: 'notice', value: { text: notice } }]);
    expect(out).toBe('Working\n');
    expect(err).toBe(`· ${notice}\n`);
  });
});

describe('show', () => {
  const messages = [
    message({ id: 'u1', type: MessageType.USER, content: [text('What is bedrock?')] }),
    message({
      id: 'a1',
      type: MessageType.AGENT,
      content: [thinking('Search first.'), ...searchBlocks],
      stopReason: StopReason.END_TURN,
      usage: { outputTokens: 900n, thinkingTokens: 1500n, webSearchRequests: 1n },
    }),
    message({ id: 'a2', type: MessageType.AGENT, content: [], stopReason: StopReason.REFUSAL, stopExplanation: 'It asks for harm.' }),
    message({
      id: 'e1',
      type: MessageType.ERROR,
      content: [text('The model declined to answer: It asks for harm. Rephrase your request or send a new message.')],
    }),
  ];

  it('prints thinking, web tools, sources, usage and the refusal (once)', () => {
    expect(renderMessages(messages)).toBe(
      [
        'user: What is bedrock?',
        'thinking:',
        '  Search first.',
        '⏺ searched: what is bedrock',
        '  → 1 result: Bedrock - Wikipedia',
        'agent: Bedrock is solid rock. [1]',
        `  [1] Bedrock - Wikipedia ${SOURCE.url}`,
        '  (1.5k thinking tokens · 1 web search)',
        '✗ The model declined to answer: It asks for harm. Rephrase your request or send a new message.',
        '',
      ].join('\n'),
    );
    expect(renderMessages(messages, { hideThinking: true })).not.toMatch(/thinking:|Search first/);
  });

  it('names the settings', () => {
    expect(renderSettings({ thinking: ThinkingLevel.LOW, serverTools: [] })).toBe('thinking: low · web tools: none\n');
    expect(renderSettings({ thinking: ThinkingLevel.MAX, serverTools: [ServerTool.WEB_FETCH, ServerTool.WEB_SEARCH] })).toBe(
      'thinking: max · web tools: web search, web fetch\n',
    );
  });
});

describe('settings flags', () => {
  it('reads --thinking and the web tool switches', () => {
    expect(parseSettingsFlags({})).toEqual({ thinking: ThinkingLevel.UNSPECIFIED, enable: [], disable: [] });
    expect(parseSettingsFlags({ thinking: 'medium', 'web-search': true, 'no-web-fetch': true })).toEqual({
      thinking: ThinkingLevel.MEDIUM,
      enable: [ServerTool.WEB_SEARCH],
      disable: [ServerTool.WEB_FETCH],
    });
    expect(() => parseSettingsFlags({ thinking: 'extreme' })).toThrow('--thinking extreme: use off, low, medium, high or max');
    expect(() => parseSettingsFlags({ 'web-fetch': true, 'no-web-fetch': true })).toThrow(
      '--web-fetch and --no-web-fetch contradict each other',
    );
  });

  it('refuses them where they mean nothing, before calling the server (exit 2)', async () => {
    const attempt = async (args: string[]) => {
      let err = '';
      const code = await run(
        args,
        { BEDROCK_URL: 'http://127.0.0.1:9', BEDROCK_TOKEN: 't', BEDROCK_RETRY_FOR: '0' },
        { out: () => undefined, err: (t) => void (err += t) },
      );
      return { code, err: err.split('\n')[0] };
    };
    expect(await attempt(['new', '--thinking', 'extreme'])).toEqual({
      code: 2,
      err: 'bedrock: --thinking extreme: use off, low, medium, high or max',
    });
    expect(await attempt(['ls', '--thinking', 'low'])).toEqual({
      code: 2,
      err: 'bedrock: --thinking applies to chat, new and settings; bedrock help ls shows its usage',
    });
    expect(await attempt(['send', 'id', 'hi', '--web-search'])).toEqual({
      code: 2,
      err: 'bedrock: --web-search applies to chat, new and settings; bedrock help send shows its usage',
    });
    expect((await attempt(['new', '--no-web-search'])).code).toBe(2);
    expect((await attempt(['chat', '--no-web-fetch'])).code).toBe(2);
    expect((await attempt(['settings'])).code).toBe(2);
    expect((await attempt(['settings', 'id', '--web-search', '--no-web-search'])).code).toBe(2);
    // Valid flags get as far as the (absent) server: exit 4, not a usage error.
    expect((await attempt(['settings', 'id', '--thinking', 'low'])).code).toBe(4);
  });
});

describe('show: numbers and tool results', () => {
  const call = (id: string, command: string) => ({
    block: { case: 'toolUse' as const, value: { id, name: 'bash', inputJson: JSON.stringify({ command }) } },
  });
  const result = (toolUseId: string, content: string, isError = false) => ({
    block: { case: 'toolResult' as const, value: { toolUseId, content, isError } },
  });
  const turn = [
    message({ id: 'u', sequence: 1n, type: MessageType.USER, content: [text('list and count')] }),
    message({
      id: 'a',
      sequence: 2n,
      type: MessageType.AGENT,
      content: [call('t1', 'ls'), call('t2', 'wc -l x')],
      stopReason: StopReason.TOOL_USE,
    }),
    message({ id: 't', sequence: 3n, type: MessageType.TOOL, content: [result('t1', 'a.txt\nb.txt'), result('t2', 'no such file', true)] }),
    message({ id: 'b', sequence: 4n, type: MessageType.AGENT, content: [text('Done.')], stopReason: StopReason.END_TURN }),
  ];

  it("prints each tool's output under its own call", () => {
    expect(renderMessages(turn)).toBe(
      [
        'user: list and count',
        'tool bash {"command":"ls"}',
        '    a.txt',
        '    b.txt',
        '  → ok',
        'tool bash {"command":"wc -l x"}',
        '  → error: no such file',
        'agent: Done.',
        '',
      ].join('\n'),
    );
  });

  it('names an MCP call by its server and tool', () => {
    const mcp = {
      block: { case: 'toolUse' as const, value: { id: 'm1', name: 'mcp__fs__read_text_file', inputJson: '{"path":"/w/a.txt"}' } },
    };
    const lines = renderMessages([
      message({ id: 'a', sequence: 1n, type: MessageType.AGENT, content: [mcp], stopReason: StopReason.TOOL_USE }),
      message({ id: 't', sequence: 2n, type: MessageType.TOOL, content: [result('m1', 'hello')] }),
    ]);
    expect(lines).toBe(['tool fs › read_text_file {"path":"/w/a.txt"}', '  → ok: hello', ''].join('\n'));
  });

  it('numbers each message with the sequence fork --at takes', () => {
    expect(renderMessages(turn, { numbered: true })).toBe(
      [
        '#1 user: list and count',
        '#2 tool bash {"command":"ls"}',
        '    a.txt',
        '    b.txt',
        '  → ok',
        'tool bash {"command":"wc -l x"}',
        '  → error: no such file',
        '#3 (tool results: under their calls above)',
        '#4 agent: Done.',
        '',
      ].join('\n'),
    );
  });
});

describe('ls', () => {
  const now = Date.UTC(2026, 10, 27, 12, 0, 0);
  const conv = (id: string, title: string, minutesAgo: number, cwd = '/home/me/projects/bedrock/services/web') =>
    create(ConversationSchema, {
      id,
      title,
      cwd,
      mode: Mode.RESTRICTED,
      state: { kind: StateKind.IDLE },
      updatedAt: { seconds: BigInt(Math.floor((now - minutesAgo * 60_000) / 1000)) },
    });
  const rows = [
    conv('b8ac0000-0000-4000-8000-000000000001', 'Speed up the CI pipeline, which takes twenty minutes on every push to main', 3),
    conv('0e1f0000-0000-4000-8000-000000000002', '', 130),
  ];

  it('is a table with a header and relative times, within the terminal width', () => {
    const table = renderConversationTable(rows, { width: 100, now });
    const lines = table.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^ID {36}STATE {2}MODE {8}CHANGED {4}TITLE +DIRECTORY$/);
    expect(lines[1]).toMatch(/^b8ac0000-0000-4000-8000-000000000001 {2}idle {3}restricted {2}3 min ago {2}Speed up.*… {2}….*\/web$/);
    expect(lines[2]).toMatch(/^0e1f0000-0000-4000-8000-000000000002 {2}idle {3}restricted {2}2 h ago {4}\(no title yet\) +….*\/web$/);
    for (const l of lines) expect(Array.from(l).length).toBeLessThan(100);
    // Not a terminal: titles cut at 60 characters, directories whole.
    const wide = renderConversationTable(rows, { now });
    expect(wide).toContain('/home/me/projects/bedrock/services/web');
    expect(wide).toContain('Speed up the CI pipeline, which takes twenty minutes on eve…');
    expect(renderConversationTable([], { now })).toBe('');
  });
});
