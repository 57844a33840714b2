/** What the model's blocks say in words (src/agent-content.ts, shared by the web UI and the CLI), run in Node. */
import { describe, expect, it } from '@jest/globals';
import { ServerTool, StopReason, ThinkingLevel } from '@bedrock/contracts';
import {
  citationSources,
  isRefusalError,
  parseThinking,
  refusalText,
  refusalWithError,
  safeUrl,
  serverToolLine,
  serverToolView,
  settingsSummary,
  SourceNumbers,
  stopMarker,
  thinkingLabel,
  thoughtSummary,
  compactionSummary,
  COMPACTING,
  usageExtras,
} from '../src/agent-content.ts';
import { formatTokens } from '../src/format.ts';

describe('thinking', () => {
  it('names the levels and reads the CLI names', () => {
    expect([ThinkingLevel.UNSPECIFIED, ThinkingLevel.OFF, ThinkingLevel.MAX].map(thinkingLabel)).toEqual(['Default', 'Off', 'Max']);
    expect(['off', 'low', 'medium', 'high', 'max', ' High '].map(parseThinking)).toEqual([
      ThinkingLevel.OFF,
      ThinkingLevel.LOW,
      ThinkingLevel.MEDIUM,
      ThinkingLevel.HIGH,
      ThinkingLevel.MAX,
      ThinkingLevel.HIGH,
    ]);
    expect(parseThinking('default')).toBeUndefined();
    expect(parseThinking('extreme')).toBeUndefined();
  });

  it('sums up a thinking block by its words', () => {
    expect(thoughtSummary('  I should  check\nthe file. ')).toBe('Thought (5 words)');
    expect(thoughtSummary('Hmm.')).toBe('Thought (1 word)');
  });

  it('says the settings in one line', () => {
    expect(settingsSummary(ThinkingLevel.HIGH, [ServerTool.WEB_FETCH, ServerTool.WEB_SEARCH])).toBe(
      'Thinking: high · Web search, Web fetch',
    );
    expect(settingsSummary(ThinkingLevel.OFF, [])).toBe('Thinking: off · no web tools');
  });
});

describe('compaction blocks', () => {
  it("marks a compaction block by its summary's words, and one without a summary", () => {
    expect(compactionSummary('  The user asked for\na fix. ')).toBe('Context compacted by the provider (summary: 6 words)');
    expect(compactionSummary('Done.')).toBe('Context compacted by the provider (summary: 1 word)');
    expect(compactionSummary('  ')).toBe('Context compacted by the provider (no summary returned)');
  });

  it('says compaction in progress apart from the answer', () => {
    expect(COMPACTING).toBe('Compacting the context…');
  });
});

describe('server-tool blocks', () => {
  const use = (name: string, input: unknown) => JSON.stringify({ type: 'server_tool_use', id: 'srvtoolu_1', name, input });

  it('reads a search and a fetch as what they did', () => {
    const search = serverToolView('server_tool_use', use('web_search', { query: 'bedrock geology' }));
    expect(search).toEqual({ kind: 'search', id: 'srvtoolu_1', query: 'bedrock geology' });
    expect(serverToolLine(search)).toBe('Searched the web: bedrock geology');
    expect(serverToolLine(serverToolView('server_tool_use', use('web_fetch', { url: 'https://example.com/a' })))).toBe(
      'Fetched https://example.com/a',
    );
    expect(serverToolLine(serverToolView('server_tool_use', use('code_execution', { code: '1+1' })))).toBe(
      "Used the provider's tool code_execution",
    );
  });

  it('lists search results with http(s) links only', () => {
    const view = serverToolView(
      'web_search_tool_result',
      JSON.stringify({
        type: 'web_search_tool_result',
        tool_use_id: 'srvtoolu_1',
        content: [
          { type: 'web_search_result', title: 'A', url: 'https://a.example/', encrypted_content: 'x' },
          { type: 'web_search_result', title: 'B', url: 'javascript:alert(1)' },
          { type: 'web_search_result', url: 'http://c.example/' },
          'not an object',
        ],
      }),
    );
    expect(view).toEqual({
      kind: 'search-results',
      toolUseId: 'srvtoolu_1',
      results: [
        { title: 'A', url: 'https://a.example/' },
        { title: 'B', url: undefined },
        { title: 'http://c.example/', url: 'http://c.example/' },
      ],
    });
    expect(serverToolLine(view)).toBe('3 results');
  });

  it('says a failed search or fetch failed, in words', () => {
    const searchError = serverToolView(
      'web_search_tool_result',
      JSON.stringify({
        type: 'web_search_tool_result',
        tool_use_id: 't',
        content: { type: 'web_search_tool_result_error', error_code: 'max_uses_exceeded' },
      }),
    );
    expect(serverToolLine(searchError)).toBe('Web search failed: the limit of uses for this answer was reached.');
    const fetchError = serverToolView(
      'web_fetch_tool_result',
      JSON.stringify({
        type: 'web_fetch_tool_result',
        tool_use_id: 't',
        content: { type: 'web_fetch_tool_result_error', error_code: 'some_new_code' },
      }),
    );
    expect(serverToolLine(fetchError)).toBe('Web fetch failed: some new code.');
  });

  it('names a fetched page by its title', () => {
    const view = serverToolView(
      'web_fetch_tool_result',
      JSON.stringify({
        type: 'web_fetch_tool_result',
        tool_use_id: 't',
        content: {
          type: 'web_fetch_result',
          url: 'https://example.com/a',
          content: { type: 'document', source: { type: 'text', data: '…' }, title: 'Page A' },
        },
      }),
    );
    expect(view).toEqual({ kind: 'fetch-result', toolUseId: 't', source: { title: 'Page A', url: 'https://example.com/a' } });
  });

  it('survives JSON that is not what it should be', () => {
    expect(serverToolLine(serverToolView('server_tool_use', 'not json'))).toBe("Used the provider's tool (unnamed)");
    expect(serverToolLine(serverToolView('mystery_block', '{"type":"mystery_block"}'))).toBe('Provider tool block mystery_block');
    expect(
      serverToolLine(
        serverToolView('server_tool_use', JSON.stringify({ type: 'server_tool_use', name: 'web_search', input: { query: 42 } })),
      ),
    ).toBe('Searched the web: (no query)');
  });
});

describe('citations', () => {
  it('reads web search and document citations; numbers each source once', () => {
    const cites = citationSources(
      JSON.stringify([
        { type: 'web_search_result_location', url: 'https://a.example/', title: 'A', cited_text: '…' },
        { type: 'char_location', document_title: 'Fetched doc', cited_text: '…', start_char_index: 0 },
        { type: 'web_search_result_location', url: 'data:text/html,x', title: 'Data' },
        { type: 'web_search_result_location' },
      ]),
    );
    expect(cites).toEqual([
      { title: 'A', url: 'https://a.example/' },
      { title: 'Fetched doc', url: undefined },
      { title: 'Data', url: undefined },
    ]);
    const numbers = new SourceNumbers();
    expect([...cites, cites[0]!].map((c) => numbers.number(c))).toEqual([1, 2, 3, 1]);
    expect(numbers.sources).toHaveLength(3);
    expect(citationSources('')).toEqual([]);
    expect(citationSources('{"not":"a list"}')).toEqual([]);
    expect(citationSources('[broken')).toEqual([]);
  });

  it('lets only http and https through as links', () => {
    expect(safeUrl('https://example.com/a b')).toBe('https://example.com/a%20b');
    expect(safeUrl('javascript:alert(1)')).toBeUndefined();
    expect(safeUrl('/relative')).toBeUndefined();
    expect(safeUrl(7)).toBeUndefined();
  });
});

describe('how a response ended', () => {
  it('marks cuts, pauses and refusals; says nothing for a normal end', () => {
    expect(stopMarker(StopReason.MAX_TOKENS, '')).toBe('Cut by the output limit — continued below.');
    expect(stopMarker(StopReason.PAUSE_TURN, '')).toBe('Paused by the provider — continued below.');
    expect(stopMarker(StopReason.REFUSAL, '')).toBe('The model declined to answer.');
    expect(stopMarker(StopReason.REFUSAL, 'It is harmful')).toBe('The model declined to answer: It is harmful.');
    expect(stopMarker(StopReason.CANCELLED, '')).toBe('Cancelled by user — the answer stopped here.');
    expect(stopMarker(StopReason.END_TURN, '')).toBeUndefined();
    expect(stopMarker(StopReason.TOOL_USE, '')).toBeUndefined();
  });

  it('says a refusal once: the error message when it carries the explanation, both when it does not', () => {
    const err = 'The model declined to answer: It is harmful. Rephrase your request or send a new message.';
    expect(refusalWithError('It is harmful.', err)).toBe(err);
    expect(refusalWithError('', 'The model declined to answer. Rephrase your request or send a new message.')).toBe(
      'The model declined to answer. Rephrase your request or send a new message.',
    );
    expect(refusalWithError('Policy X', 'The model declined to answer. Rephrase your request.')).toBe(
      'The model declined to answer. Rephrase your request. (The model declined to answer: Policy X.)',
    );
    expect(refusalWithError('Policy X', '')).toBe('The model declined to answer: Policy X.');
    expect(refusalText('Ends with a question?')).toBe('The model declined to answer: Ends with a question?');
    expect(isRefusalError(err)).toBe(true);
    expect(isRefusalError('The provider is overloaded.')).toBe(false);
  });
});

describe('usage worth naming', () => {
  it('counts thinking tokens and web searches and fetches when there are any', () => {
    expect(usageExtras({ thinkingTokens: 1234n, webSearchRequests: 2n, webFetchRequests: 1n }, formatTokens)).toBe(
      '1.2k thinking tokens · 2 web searches · 1 web fetch',
    );
    expect(usageExtras({ thinkingTokens: 1n, webSearchRequests: 1n, webFetchRequests: 0n })).toBe('1 thinking token · 1 web search');
    expect(usageExtras({ thinkingTokens: 0n, webSearchRequests: 0n, webFetchRequests: 0n })).toBe('');
    expect(usageExtras(undefined)).toBe('');
  });
});
