import { CONTINUATION_PROMPT } from './constants.ts';
import type { ToolCall } from './types.ts';

/** The tool-less continuation request's prompt, naming tools that were not executed (REQ-BED-020). */
export function buildContinuationPrompt(rejectedToolCalls: readonly ToolCall[]): string {
  if (rejectedToolCalls.length === 0) return CONTINUATION_PROMPT;
  const lines = rejectedToolCalls.map((call) => `- ${call.name}`).join('\n');
  return `${CONTINUATION_PROMPT}\n\nNote: The following tool calls were requested but not executed due to context limits:\n${lines}\n`;
}
