/**
 * The prompt cache of the local Messages API server, modelled on the provider's documented rules, so a
 * test or a benchmark sees the cache counts a request would really get: the request is one prefix (tools →
 * system → messages) whose `cache_control` breakpoints cache it up to themselves, read back within a 20-block
 * look-back, above a model's minimum length, invalidated level by level. The rules and what is assumed:
 * docs/testing.md, "The model: the local Messages API server" ("The prompt cache").
 */
import { createHash } from 'node:crypto';
import { estimateTokens } from './sse-encoder.ts';
import type { MessagesRequestBody } from './script.ts';

/** Blocks before a breakpoint that the API looks back through for a cached prefix (the breakpoint's own included). */
export const CACHE_LOOKBACK_BLOCKS = 20;
export const TTL_MS = { '5m': 5 * 60_000, '1h': 60 * 60_000 } as const;
export type CacheTtl = keyof typeof TTL_MS;

/**
 * The smallest prefix (tokens) the fake caches for a model. Documented (secondary sources
 * quoting the provider's table): 4096 for Opus 4.5/4.6/4.7 and Haiku 4.5, 1024 for Sonnet
 * 4.5/4.6 (one source says 2048 for Sonnet 4.6), 2048 for Haiku 3/3.5. Claude 5 models and
 * `bedrock-offline`: not documented where we looked; 1024 is assumed.
 */
export function minCacheableTokens(model: string): number {
  if (/^claude-opus-4-[567]/.test(model) || /^claude-haiku-4-5/.test(model)) return 4096;
  if (/^claude-3-(5-)?haiku/.test(model)) return 2048;
  return 1024;
}

/**
 * Usage follows the API's identity: input_tokens (after the last breakpoint, or not cached) +
 * cache_creation_input_tokens + cache_read_input_tokens = the whole input, with the creation split by
 * TTL in `cache_creation`.
 */
export interface PromptCacheUsage {
  readonly input_tokens: number;
  readonly cache_creation_input_tokens: number;
  readonly cache_read_input_tokens: number;
  readonly cache_creation: { readonly ephemeral_5m_input_tokens: number; readonly ephemeral_1h_input_tokens: number };
}

/** One server's cache: prefix hash → expiry. `now` is injectable for TTL tests. */
export class PromptCache {
  readonly #entries = new Map<string, { expiresAt: number; ttl: CacheTtl }>();
  constructor(private readonly now: () => number = Date.now) {}

  /** Entries alive now (for tests). */
  get size(): number {
    const t = this.now();
    return [...this.#entries.values()].filter((e) => e.expiresAt > t).length;
  }

  clear(): void {
    this.#entries.clear();
  }

  /**
   * Reads and writes the cache for one (valid) request and returns its input usage. A breakpoint (at most 4:
   * the validator refuses more) caches the prefix up to and including it for its `ttl` (`5m` by default, or
   * `1h`), refreshed each time it is read; a prefix shorter than the model's minimum is neither written nor
   * read (no error: the request is just not cached there).
   */
  apply(body: MessagesRequestBody, tokensOf: (json: string) => number = estimateTokens): PromptCacheUsage {
    const units = prefixUnits(body, tokensOf);
    const total = units.reduce((n, u) => n + u.tokens, 0);
    const cumulative: number[] = [];
    units.reduce((n, u, i) => (cumulative[i] = n + u.tokens), 0);
    const min = minCacheableTokens(body.model);
    const t = this.now();
    const alive = (hash: string) => {
      const e = this.#entries.get(hash);
      return e !== undefined && e.expiresAt > t ? e : undefined;
    };
    const breakpoints = units.flatMap((u, i) => (u.ttl ? [i] : []));

    // Read: the longest cached prefix any breakpoint finds within its look-back window.
    let readEnd = -1;
    for (const p of breakpoints) {
      for (let k = p; k >= 0 && k > p - CACHE_LOOKBACK_BLOCKS; k--) {
        if (alive(units[k]!.hash)) {
          readEnd = Math.max(readEnd, k);
          break;
        }
      }
    }
    const read = readEnd >= 0 ? cumulative[readEnd]! : 0;
    if (readEnd >= 0) {
      const hit = alive(units[readEnd]!.hash)!;
      hit.expiresAt = t + TTL_MS[hit.ttl];
    }

    // Write: each breakpoint past what was read whose prefix is long enough.
    const creation = { '5m': 0, '1h': 0 };
    let written = read;
    for (const p of breakpoints) {
      if (cumulative[p]! < min) continue;
      const ttl = units[p]!.ttl!;
      const existing = alive(units[p]!.hash);
      if (existing) existing.expiresAt = Math.max(existing.expiresAt, t + TTL_MS[ttl]);
      else this.#entries.set(units[p]!.hash, { expiresAt: t + TTL_MS[ttl], ttl });
      if (p <= readEnd) continue;
      creation[ttl] += cumulative[p]! - written;
      written = cumulative[p]!;
    }
    const created = creation['5m'] + creation['1h'];
    return {
      input_tokens: Math.max(0, total - read - created),
      cache_creation_input_tokens: created,
      cache_read_input_tokens: read,
      cache_creation: { ephemeral_5m_input_tokens: creation['5m'], ephemeral_1h_input_tokens: creation['1h'] },
    };
  }
}

interface Unit {
  /** The prefix up to and including this block. */
  readonly hash: string;
  readonly tokens: number;
  /** Set when the block carries cache_control. */
  readonly ttl?: CacheTtl;
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The request as the cache sees it: one unit per tool, system block and message content block, each
 * hashed with everything before it. The levels invalidate downwards: a change of the tools changes every
 * prefix; of the system prompt, the system and message prefixes; of `tool_choice` or the thinking
 * configuration (`thinking`, and `output_config.effort` — an assumption, see the docs), only the message
 * prefixes.
 */
export function prefixUnits(body: MessagesRequestBody, tokensOf: (json: string) => number = estimateTokens): Unit[] {
  const units: Unit[] = [];
  let hash = 'bedrock-fake-prompt-cache';
  const push = (block: unknown, extra = '') => {
    const cc = isObject(block) ? block.cache_control : undefined;
    const { cache_control: _cc, ...rest } = isObject(block) ? block : { value: block };
    void _cc;
    const json = extra + JSON.stringify(rest);
    hash = createHash('sha256').update(hash).update('\0').update(json).digest('hex');
    const ttl = isObject(cc) ? (cc.ttl === '1h' ? '1h' : '5m') : undefined;
    units.push(ttl ? { hash, tokens: tokensOf(json), ttl } : { hash, tokens: tokensOf(json) });
  };
  // A deferred tool (defer_loading) is not in the prompt until a search returns it: not in the prefix.
  for (const tool of body.tools ?? []) if (!(isObject(tool) && tool.defer_loading === true)) push(tool);
  // The system level.
  hash = createHash('sha256').update(hash).update('\0system').digest('hex');
  if (typeof body.system === 'string') {
    if (body.system !== '') push({ type: 'text', text: body.system });
  } else for (const block of body.system ?? []) push(block);
  // The message level also depends on what the model is told to do with the same prefix.
  const modeKey = JSON.stringify({
    tool_choice: body.tool_choice ?? { type: 'auto' },
    thinking: body.thinking ?? null,
    effort: body.output_config?.effort ?? null,
  });
  hash = createHash('sha256').update(hash).update('\0messages').update(modeKey).digest('hex');
  for (const m of messagesFromLastCompaction(body.messages)) {
    const content = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : m.content;
    content.forEach((block, i) => push(block, i === 0 ? `${m.role}:` : ''));
  }
  return units;
}

/**
 * The messages the API reads: with a `compaction` block in the history, the blocks before the
 * last one are dropped (the assistant turn holding it starts with it).
 */
export function messagesFromLastCompaction(
  messages: MessagesRequestBody['messages'],
): Array<{ role: 'user' | 'assistant'; content: string | ReadonlyArray<Json & { type: string }> }> {
  for (let i = messages.length - 1; i >= 0; i--) {
    const content = messages[i]!.content;
    if (typeof content === 'string') continue;
    const at = content.map((b) => b.type).lastIndexOf('compaction');
    if (at >= 0) return [{ role: messages[i]!.role, content: content.slice(at) }, ...messages.slice(i + 1)];
  }
  return [...messages];
}
