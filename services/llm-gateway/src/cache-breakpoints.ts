/**
 * Prompt-caching breakpoints of a Messages API request (docs/llm-gateway.md, "Prompt
 * caching"): after the tools, after the system prompt, at the end of the previous user turn
 * and at the end of the request — never more than {@link MAX_CACHE_BREAKPOINTS} — each with its
 * own TTL (`5m` or `1h`).
 */
import type Anthropic from '@anthropic-ai/sdk';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

/** The API accepts at most this many cache_control breakpoints in one request. */
export const MAX_CACHE_BREAKPOINTS = 4;

export type CacheTtl = '5m' | '1h';
export const CACHE_TTLS: readonly CacheTtl[] = ['5m', '1h'];

/** The TTL of each breakpoint: after the tools, after the system prompt, in the messages (both). */
export interface CacheTtls {
  readonly tools: CacheTtl;
  readonly system: CacheTtl;
  readonly messages: CacheTtl;
}

/**
 * The default: one hour everywhere. A user reads the answer, tries it, looks something up:
 * pauses longer than five minutes between turns are common, and each one lets a 5-minute cache
 * lapse, so the next turn writes the whole history again (1.25x input) instead of reading it
 * (0.1x). A 1-hour write costs 0.75x input more, but only on the tokens a request adds
 * (docs/llm-gateway.md, "Cache lifetime").
 */
export const DEFAULT_CACHE_TTLS: CacheTtls = { tools: '1h', system: '1h', messages: '1h' };

type CacheControl = { type: 'ephemeral'; ttl: CacheTtl };
const control = (ttl: CacheTtl): CacheControl => ({ type: 'ephemeral', ttl });

/**
 * Places the breakpoints, in place. Positions, in prefix order: the last tool that is not
 * deferred (caches the tools alone, so a changed system prompt still reads them; deferred tools
 * are not in the prefix), the last system block (tools + system), the last block of the previous user turn (this request reads what the last one
 * wrote even past the API's ~20-block look-back, e.g. after many tool calls) and the last block
 * of the request (written for the next one). Never on thinking, redacted thinking or server-tool
 * blocks: the nearest earlier block that can carry one gets it. The provider wants longer TTLs
 * before shorter ones, so a breakpoint is never shorter than one after it (an earlier `5m`
 * followed by a `1h` is sent as `1h`). Returns the breakpoints placed, in order.
 */
export function placeCacheBreakpoints(params: Anthropic.MessageCreateParamsStreaming, ttls: CacheTtls = DEFAULT_CACHE_TTLS): CacheTtl[] {
  const { messages } = params;
  const tools = params.tools;
  const system = params.system as Anthropic.TextBlockParam[] | undefined;
  const userTurns = messages.flatMap((m, i) => (m.role === 'user' ? [i] : []));
  const previousUser = userTurns.length >= 2 ? userTurns[userTurns.length - 2] : undefined;

  // Where each breakpoint goes, in prefix order, before any is written.
  const marks: Array<{ ttl: CacheTtl; apply: (c: CacheControl) => void }> = [];
  // The last tool that is not deferred: deferred tools (defer_loading) are not in the prefix.
  const lastLoaded = tools ? tools.findLastIndex((t) => (t as { defer_loading?: boolean }).defer_loading !== true) : -1;
  if (tools && lastLoaded >= 0) {
    const i = lastLoaded;
    marks.push({ ttl: ttls.tools, apply: (c) => (tools[i] = { ...tools[i]!, cache_control: c } as Anthropic.ToolUnion) });
  }
  if (system && system.length > 0) {
    const i = system.length - 1;
    marks.push({ ttl: ttls.system, apply: (c) => (system[i] = { ...system[i]!, cache_control: c }) });
  }
  const taken = new Set<string>();
  for (const end of [previousUser, messages.length - 1]) {
    if (end === undefined) continue;
    const at = nearestCacheable(messages, end);
    if (!at || taken.has(`${at.mi}.${at.bi}`)) continue;
    taken.add(`${at.mi}.${at.bi}`);
    marks.push({
      ttl: ttls.messages,
      apply: (c) => {
        const content = messages[at.mi]!.content as BlockParam[];
        content[at.bi] = { ...content[at.bi]!, cache_control: c } as BlockParam;
      },
    });
  }
  const placed = marks.slice(0, MAX_CACHE_BREAKPOINTS);
  // Longer TTLs first: walking back, a breakpoint takes the longest TTL of those after it.
  let later: CacheTtl = '5m';
  for (let i = placed.length - 1; i >= 0; i--) {
    if (placed[i]!.ttl === '1h') later = '1h';
    placed[i]!.ttl = later;
  }
  for (const mark of placed) mark.apply(control(mark.ttl));
  return placed.map((m) => m.ttl);
}

const CACHEABLE = new Set(['text', 'image', 'tool_use', 'tool_result']);

/** The last cacheable block at or before the end of `messages[end]`. */
function nearestCacheable(messages: readonly MessageParam[], end: number): { mi: number; bi: number } | undefined {
  for (let mi = end; mi >= 0; mi--) {
    const content = messages[mi]!.content as BlockParam[];
    for (let bi = content.length - 1; bi >= 0; bi--) {
      if (CACHEABLE.has(content[bi]!.type)) return { mi, bi };
    }
  }
  return undefined;
}
