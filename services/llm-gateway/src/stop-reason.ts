import { StopReason } from '@bedrock/contracts';

/** Every stop reason the Messages API documents, mapped to the contract's enum. */
export const STOP_REASONS: Readonly<Record<string, StopReason>> = {
  end_turn: StopReason.END_TURN,
  tool_use: StopReason.TOOL_USE,
  max_tokens: StopReason.MAX_TOKENS,
  stop_sequence: StopReason.STOP_SEQUENCE,
  pause_turn: StopReason.PAUSE_TURN,
  refusal: StopReason.REFUSAL,
  model_context_window_exceeded: StopReason.MODEL_CONTEXT_WINDOW_EXCEEDED,
};

/**
 * Maps the API's stop reason. A reason the API may add later, or none at all after a
 * message_stop, is inferred from the content (tool calls → TOOL_USE, else END_TURN) so the
 * state machine always gets an actionable value; `inferred` says so for the log.
 */
export function mapStopReason(reason: string | null | undefined, hasToolUse: boolean): { stopReason: StopReason; inferred: boolean } {
  const known = reason ? STOP_REASONS[reason] : undefined;
  if (known !== undefined) return { stopReason: known, inferred: false };
  return { stopReason: hasToolUse ? StopReason.TOOL_USE : StopReason.END_TURN, inferred: true };
}
