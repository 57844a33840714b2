/**
 * Fixtures shared by the build-request tests (src/build-request*.test.ts): the run options,
 * the tool names and cache breakpoints of a built request, and a web search call, result and citation.
 */
import type Anthropic from '@anthropic-ai/sdk';
import { runOptions } from './helpers.ts';

export const options = runOptions();
/** The names of the tools a request defines (client and server tools). */
export const toolNames = (params: Anthropic.MessageCreateParamsStreaming) => params.tools?.map((t) => (t as { name: string }).name);

export const cache = (b: unknown) => (b as { cache_control?: unknown }).cache_control;
/** Every block of the request that carries a cache breakpoint: "system", "tools.N" or "M.B". */
export function breakpoints(params: Anthropic.MessageCreateParamsStreaming): string[] {
  return [
    ...((params.system as Anthropic.TextBlockParam[] | undefined) ?? []).flatMap((b, i) => (cache(b) ? [`system.${i}`] : [])),
    ...(params.tools ?? []).flatMap((t, i) => (cache(t) ? [`tools.${i}`] : [])),
    ...params.messages.flatMap((m, i) => (m.content as unknown[]).flatMap((b, j) => (cache(b) ? [`${i}.${j}`] : []))),
  ];
}

export const searchUse = { type: 'server_tool_use', id: 'srvtoolu_01', name: 'web_search', input: { query: 'bedrock release date' } };
export const searchResult = {
  type: 'web_search_tool_result',
  tool_use_id: 'srvtoolu_01',
  content: [
    {
      type: 'web_search_result',
      url: 'https://example.com/r',
      title: 'Release',
      encrypted_content: 'EqgfCioIARgBIiQ3YTAwMjY1Mi1',
      page_age: null,
    },
  ],
};
export const citation = {
  type: 'web_search_result_location',
  url: 'https://example.com/r',
  title: 'Release',
  encrypted_index: 'Eo8BCioIAhgBIiQyYjQ0OWJmZi1',
  cited_text: 'Released in May.',
};
