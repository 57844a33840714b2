import type { ToolOutcome } from './tool-types.ts';

export interface ThinkInput {
  readonly thoughts: string;
}

/** No side effects: the thoughts are already in the conversation as the tool call's input. */
export function runThink(_input: ThinkInput): ToolOutcome {
  return { content: 'Your thoughts have been recorded.', isError: false, exitCode: -1, cancelled: false };
}
