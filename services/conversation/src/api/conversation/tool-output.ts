/**
 * What the running tool has printed so far, as its watchers saw it stream: the ephemeral
 * `tool_output` events after the stream's last durable event. A cancel keeps it in the tool's
 * result (docs/state-machine.md, "Cancel keeps what streamed").
 */
import type { NotificationStreams } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';
import type { ConversationState, ToolOutputSeen } from '../../core/index.ts';

/** The tail kept, characters: a tool's whole output is bounded by the runner, this is what a cancel keeps of it. */
export const CANCELLED_OUTPUT_MAX_CHARS = 16_000;
/** Stream entries read at most (the runner batches its output, so a tool's live output is far fewer). */
const MAX_EVENTS = 10_000;

export async function runningToolOutput(
  streams: NotificationStreams,
  conversationId: string,
  state: ConversationState,
  logger?: Logger,
): Promise<ToolOutputSeen | undefined> {
  const phase = state.phase;
  if (phase.kind !== 'tool_executing') return undefined;
  try {
    const last = await streams.last(conversationId);
    const events = await streams.read(conversationId, { sequence: last.sequence, deltaIndex: 0 }, { limit: MAX_EVENTS });
    let text = '';
    for (const e of events) if (e.kind.case === 'toolOutput' && e.kind.value.toolUseId === phase.current.id) text += e.kind.value.text;
    if (!text.trim()) return undefined;
    const kept = text.length > CANCELLED_OUTPUT_MAX_CHARS ? `…(earlier output cut)\n${text.slice(-CANCELLED_OUTPUT_MAX_CHARS)}` : text;
    return { toolUseId: phase.current.id, text: kept };
  } catch (err) {
    // Best effort: the cancel goes ahead without the output rather than fail.
    logger?.warn({ err, conversation_id: conversationId }, 'reading the running tool output for a cancel failed; cancelled without it');
    return undefined;
  }
}
