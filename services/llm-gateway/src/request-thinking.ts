/**
 * Extended thinking in the form the model takes (docs/llm-gateway.md, "Thinking"): the effort
 * of adaptive models, the token budget of budget models, and the API's rule that leaves it out
 * of a tool loop whose assistant turn was made without thinking.
 */
import type Anthropic from '@anthropic-ai/sdk';
import type { Effort, ModelLimits } from '@bedrock/contracts/models';
import { ThinkingLevel } from '@bedrock/contracts';
import type { BuildHooks } from './build-options.ts';

type MessageParam = Anthropic.MessageParam;
type BlockParam = Anthropic.ContentBlockParam;

/** Thinking budgets of budget-form models, by level, in tokens. */
export const THINKING_BUDGETS: Readonly<Partial<Record<ThinkingLevel, number>>> = {
  [ThinkingLevel.LOW]: 4_000,
  [ThinkingLevel.MEDIUM]: 10_000,
  [ThinkingLevel.HIGH]: 24_000,
  [ThinkingLevel.XHIGH]: 32_000,
  [ThinkingLevel.MAX]: 48_000,
};
/** The API's smallest thinking budget. */
export const MIN_THINKING_BUDGET = 1_024;
/** Output kept for the answer beyond a thinking budget: max_tokens ≥ budget + this. */
export const ANSWER_HEADROOM = 4_096;

/** Effort levels of adaptive-form models, by level. */
const EFFORTS: Readonly<Partial<Record<ThinkingLevel, Effort>>> = {
  [ThinkingLevel.LOW]: 'low',
  [ThinkingLevel.MEDIUM]: 'medium',
  [ThinkingLevel.HIGH]: 'high',
  [ThinkingLevel.XHIGH]: 'xhigh',
  [ThinkingLevel.MAX]: 'max',
};
const EFFORT_ORDER: readonly Effort[] = ['low', 'medium', 'high', 'xhigh', 'max'];

/** The level's effort, or the nearest one below that the model takes (`xhigh` → `high`). */
export function effortFor(level: ThinkingLevel, efforts: readonly Effort[]): Effort {
  const wanted = EFFORTS[level] ?? 'high';
  if (efforts.length === 0 || efforts.includes(wanted)) return wanted;
  for (let i = EFFORT_ORDER.indexOf(wanted) - 1; i >= 0; i--) if (efforts.includes(EFFORT_ORDER[i]!)) return EFFORT_ORDER[i]!;
  return wanted;
}

/**
 * Thinking in the form the model takes (docs/llm-gateway.md, "Thinking"): adaptive models get
 * an effort level, budget models a token budget (max_tokens raised to fit it, within the
 * model's limit). The configuration is the same on every request of a conversation: adaptive
 * models may choose not to think, so a turn without a thinking block never changes it. Left out
 * only when the level is OFF, the model cannot think, or — budget models — the history does not
 * allow it (see {@link thinkingBlocker}).
 */
export function applyThinking(
  params: Anthropic.MessageCreateParamsStreaming,
  level: ThinkingLevel,
  spec: ModelLimits,
  hooks: BuildHooks,
): void {
  const form = spec.thinking;
  const modelLimit = spec.maxOutputTokens;
  if (form === 'none' || level === ThinkingLevel.OFF || level === ThinkingLevel.UNSPECIFIED) return;
  if (form === 'adaptive') {
    params.thinking = { type: 'adaptive', display: 'summarized' };
    params.output_config = { effort: effortFor(level, spec.efforts) };
    return;
  }
  const blocker = thinkingBlocker(params.messages);
  if (blocker) {
    hooks.onThinkingOmitted?.(blocker, firstRequestOfLoop(params.messages));
    return;
  }
  const wanted = THINKING_BUDGETS[level] ?? THINKING_BUDGETS[ThinkingLevel.HIGH]!;
  const maxTokens = Math.max(params.max_tokens, Math.min(wanted + ANSWER_HEADROOM, modelLimit));
  const budget = Math.max(MIN_THINKING_BUDGET, Math.min(wanted, maxTokens - ANSWER_HEADROOM));
  // The API wants the budget below max_tokens; a model whose whole output limit is that small cannot think.
  if (budget >= maxTokens) {
    hooks.onThinkingOmitted?.(
      `the model's output limit (${modelLimit} tokens) leaves no room for a thinking budget of at least ${MIN_THINKING_BUDGET} tokens`,
      false,
    );
    return;
  }
  params.max_tokens = maxTokens;
  params.thinking = { type: 'enabled', budget_tokens: budget };
}

/**
 * Whether the request is the first of its tool loop to go without thinking: the assistant turn
 * it answers (or resumes) comes straight after a plain user turn, so no earlier request of the
 * loop was blocked. Deterministic for a history, so a retried job says the same.
 */
function firstRequestOfLoop(messages: readonly MessageParam[]): boolean {
  let i = messages.length - 1;
  if (messages[i]?.role === 'user') i--;
  const before = messages[i - 1];
  return !before || (before.content as BlockParam[])[0]?.type !== 'tool_result';
}

/**
 * The API's rule for manual (budget) thinking across tool turns: with thinking on, the final assistant turn
 * (the one before the last user turn when that turn answers tool calls, or the request's own
 * last turn when it ends in a paused assistant turn) must start with a thinking or redacted
 * thinking block. A turn produced while thinking was off does not, so the request goes
 * without thinking until the next plain user turn. Returns why, or undefined when allowed.
 */
export function thinkingBlocker(messages: readonly MessageParam[]): string | undefined {
  const startsWithThinking = (m: MessageParam | undefined) => {
    const first = (m?.content as BlockParam[] | undefined)?.find((b) => (b.type as string) !== 'compaction');
    return first?.type === 'thinking' || first?.type === 'redacted_thinking';
  };
  const lastIndex = messages.length - 1;
  const last = messages[lastIndex];
  if (last?.role === 'assistant') {
    return startsWithThinking(last) ? undefined : 'the paused assistant turn it resumes does not start with a thinking block';
  }
  const first = (last?.content as BlockParam[] | undefined)?.[0];
  if (first?.type !== 'tool_result') return undefined;
  const assistant = messages[lastIndex - 1];
  return startsWithThinking(assistant) ? undefined : 'the tool calls it answers were made in a turn without thinking';
}
