/**
 * Server-side compaction (beta `compact-2026-01-12`; docs/llm-gateway.md, "Compaction"): for a
 * model whose registry entry says `compaction`, every request carries the beta header and a
 * `context_management` edit `compact_20260112` triggered at {@link COMPACTION_TRIGGER_FRACTION}
 * of the context window. Kept apart from build-request.ts, which calls {@link applyCompaction} once.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type { CompactionBlock } from '@bedrock/contracts';

export const COMPACTION_BETA = 'compact-2026-01-12';
export const COMPACT_EDIT_TYPE = 'compact_20260112';
/** The API's smallest trigger. */
export const MIN_COMPACTION_TRIGGER = 50_000;
/**
 * Compaction starts when a request's input reaches this fraction of the window: the context
 * warning's threshold, below the conversation service's 90% continuation threshold, so the
 * provider compacts before the conversation would stop for a continuation summary.
 */
export const COMPACTION_TRIGGER_FRACTION = 0.8;

export function compactionTrigger(contextWindow: number): number {
  return Math.max(MIN_COMPACTION_TRIGGER, Math.floor(contextWindow * COMPACTION_TRIGGER_FRACTION));
}

/**
 * Adds the compact edit when the model takes compaction (its window leaving room for the API's
 * minimum trigger): to every request of such a model, turns and continuation summaries alike, so
 * the request's form never changes. When a request's input crosses the trigger, the provider
 * summarises the conversation into a `compaction` block at the start of its answer and goes on.
 */
export function applyCompaction(
  params: Anthropic.MessageCreateParamsStreaming,
  spec: { readonly compaction?: boolean; readonly contextWindow: number },
): void {
  if (!spec.compaction || spec.contextWindow <= MIN_COMPACTION_TRIGGER) return;
  (params as unknown as Record<string, unknown>).context_management = {
    edits: [{ type: COMPACT_EDIT_TYPE, trigger: { type: 'input_tokens', value: compactionTrigger(spec.contextWindow) } }],
  };
}

/** The request's extra headers: the compaction beta when it asks for compaction. */
export function compactionHeaders(params: Anthropic.MessageCreateParamsStreaming): Record<string, string> | undefined {
  return (params as unknown as Record<string, unknown>).context_management ? { 'anthropic-beta': COMPACTION_BETA } : undefined;
}

/**
 * A stored compaction block as it is sent back: exactly the JSON the provider returned (its summary
 * when that is all there is). The block is stored with the agent message and sent back verbatim;
 * the provider reads the conversation from it on.
 */
export function compactionParam(block: CompactionBlock): Anthropic.ContentBlockParam {
  let json: unknown;
  try {
    json = JSON.parse(block.blockJson);
  } catch {
    json = undefined;
  }
  const verbatim =
    typeof json === 'object' && json !== null && !Array.isArray(json)
      ? { ...(json as Record<string, unknown>), type: 'compaction' }
      : { type: 'compaction', content: block.content || null };
  return verbatim as unknown as Anthropic.ContentBlockParam;
}
