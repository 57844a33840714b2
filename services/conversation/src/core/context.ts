import { DEFAULT_POLICY } from './constants.ts';
import type { ConversationContext, Policy } from './types.ts';

export interface ContextInit {
  readonly conversationId: string;
  readonly cwd?: string;
  readonly model?: string;
  /** Default 200000 tokens. */
  readonly contextWindow?: number;
  /** The model's output limit; default 64000 tokens. */
  readonly maxOutputTokens?: number;
  readonly isSubAgent?: boolean;
  readonly parentId?: string | null;
  /** Default true. */
  readonly sandboxAvailable?: boolean;
  readonly policy?: Partial<Policy>;
  /** Default null: no budget. */
  readonly remainingBudgetMicros?: number | null;
}

/** Builds a context, deriving the exhaustion behaviour from whether it is a sub-agent (spec 000). */
export function makeContext(init: ContextInit): ConversationContext {
  const isSubAgent = init.isSubAgent ?? false;
  return {
    conversationId: init.conversationId,
    cwd: init.cwd ?? '/work',
    model: init.model ?? 'test-model',
    contextWindow: init.contextWindow ?? 200_000,
    maxOutputTokens: init.maxOutputTokens ?? 64_000,
    isSubAgent,
    parentId: init.parentId ?? null,
    sandboxAvailable: init.sandboxAvailable ?? true,
    contextExhaustionBehavior: isSubAgent ? 'intentionally_unhandled' : 'threshold_continuation',
    policy: { ...DEFAULT_POLICY, ...init.policy },
    remainingBudgetMicros: init.remainingBudgetMicros ?? null,
  };
}
