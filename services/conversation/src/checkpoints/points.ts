/**
 * Where a conversation's files can be rewound to (docs/workspaces.md, "Checkpoints"): which
 * checkpoint holds the files as at a message, and the storage's names of checkpoints. Pure.
 */

/** A stored message as this module needs it. */
export interface PointMessage {
  readonly sequence: number;
  readonly type: string;
}

export type FilesPoint =
  { readonly kind: 'checkpoint'; readonly turn: number } | { readonly kind: 'now' } | { readonly kind: 'none'; readonly problem: string };

/** The storage's name of a conversation's checkpoint of a turn: `c<uuid without dashes>-<turn message>`. */
export function checkpointIdOf(conversationId: string, turn: number): string {
  return `${checkpointPrefixOf(conversationId)}${turn}`;
}

export function checkpointPrefixOf(conversationId: string): string {
  return `c${conversationId.toLowerCase().replace(/[^0-9a-z]/g, '')}-`;
}

/**
 * The files as at message `at`: which checkpoint holds them. `turns` are the turn messages that
 * have a checkpoint, any order.
 *
 * A checkpoint is taken before the first tool of a user turn: it holds the files as they were
 * when that turn's user message arrived (after every earlier turn's tools). So the files "as at
 * message N" are those of the first checkpoint whose turn message comes after N, provided no
 * tool ran between N and that turn; when no checkpoint comes after N and no tool ran since N,
 * the files are as they are now. A point inside a turn after which that turn's tools ran has
 * no checkpoint: the answer names the turn's start, which has one.
 */
export function filesPoint(messages: readonly PointMessage[], turns: readonly number[], at: number): FilesPoint {
  const next = [...turns].filter((t) => t > at).sort((a, b) => a - b)[0];
  const until = next ?? Infinity;
  const toolAfter = messages.find((m) => m.type === 'tool' && m.sequence > at && m.sequence < until);
  if (!toolAfter) return next === undefined ? { kind: 'now' } : { kind: 'checkpoint', turn: next };
  // Tools ran after `at` before any checkpoint: `at` is inside a turn (or its checkpoint is gone).
  const turnStart = [...messages].reverse().find((m) => m.type === 'user' && m.sequence <= toolAfter.sequence);
  const hasStart = turnStart !== undefined && turns.includes(turnStart.sequence);
  return {
    kind: 'none',
    problem: hasStart
      ? `tools ran after message ${at} in the same turn (message ${toolAfter.sequence}), and files are captured only at the start of a turn: rewind to message ${turnStart.sequence - 1} (before that turn began) instead`
      : `the files as at message ${at} were not captured (tools ran after it, at message ${toolAfter.sequence}, and no checkpoint holds the files from before them: it was never taken, or removed by retention)`,
  };
}

/** The turn (its user message) whose first tool a checkpoint precedes: the last user message. */
export function currentTurn(messages: readonly PointMessage[]): number | undefined {
  for (let i = messages.length - 1; i >= 0; i--) if (messages[i]!.type === 'user') return messages[i]!.sequence;
  return undefined;
}
