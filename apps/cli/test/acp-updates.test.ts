/**
 * The ACP translation of the provider's compaction (src/acp/updates.ts), without a server:
 * `COMPACTION` deltas are one thought chunk of progress, never answer text; the persisted block
 * is one line of agent text without its summary.
 */
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, MessageSchema, MessageType, StopReason, TokenDeltaKind } from '@bedrock/contracts';
import { UpdateTranslator } from '../src/acp/updates.ts';

const SUMMARY = 'The user asked to fix the parser; tests pass.';
const delta = (text: string, kind: TokenDeltaKind, blockIndex: number) =>
  create(ConversationEventSchema, { conversationId: 'c', kind: { case: 'tokenDelta', value: { requestId: 'r', text, blockIndex, kind } } });

describe('compaction in ACP', () => {
  it('streams as one thought chunk, then the persisted block is one marked line of agent text', () => {
    const t = new UpdateTranslator('/w');
    const live = [
      ...t.event(delta(SUMMARY.slice(0, 10), TokenDeltaKind.COMPACTION, 0)),
      ...t.event(delta(SUMMARY.slice(10), TokenDeltaKind.COMPACTION, 0)),
      ...t.event(delta('Fixed.', TokenDeltaKind.TEXT, 1)),
    ];
    expect(live).toEqual([
      { sessionUpdate: 'agent_thought_chunk', content: { type: 'text', text: 'Compacting the context…\n' } },
      { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: 'Fixed.' } },
    ]);
    const m = create(MessageSchema, {
      id: 'a',
      type: MessageType.AGENT,
      stopReason: StopReason.END_TURN,
      content: [
        { block: { case: 'compaction', value: { content: SUMMARY, blockJson: '{}' } } },
        { block: { case: 'text', value: { text: 'Fixed.' } } },
      ],
    });
    expect(t.message(m, true)).toEqual([
      {
        sessionUpdate: 'agent_message_chunk',
        content: { type: 'text', text: '\n⏺ Context compacted by the provider (summary: 9 words)\n' },
      },
    ]);
  });
});
