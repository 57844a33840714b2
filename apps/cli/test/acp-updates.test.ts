/**
 * The ACP translation of the provider's compaction (src/acp/updates.ts), without a server:
 * `COMPACTION` deltas are one thought chunk of progress, never answer text; the persisted block
 * is one line of agent text without its summary.
 */
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import {
  ConversationEventSchema,
  MessageSchema,
  MessageType,
  Mode,
  StateKind,
  StopReason,
  TokenDeltaKind,
  type ConversationEvent,
} from '@bedrock/contracts';
import { UpdateTranslator, sessionModes, upgradeTitle } from '../src/acp/updates.ts';

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

const ev = (kind: unknown): ConversationEvent => create(ConversationEventSchema, { conversationId: 'c', kind } as never);

describe('notices, modes, titles, usage and a denied upgrade in ACP', () => {
  it("says the service's notices as agent text", () => {
    const t = new UpdateTranslator('/w');
    expect(t.event(ev({ case: 'notice', value: { text: 'Thinking is off until your next message.' } }))).toEqual([
      { sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: '\n\nNote: Thinking is off until your next message.\n\n' } },
    ]);
  });

  it('maps mode changes to session modes, titles to session info, context usage to usage updates (once per change)', () => {
    const t = new UpdateTranslator('/w');
    expect(t.event(ev({ case: 'modeChanged', value: { mode: Mode.UNRESTRICTED } }))).toEqual([
      { sessionUpdate: 'current_mode_update', currentModeId: 'unrestricted' },
    ]);
    expect(t.event(ev({ case: 'titleChanged', value: { title: 'Fix the parser' } }))).toEqual([
      { sessionUpdate: 'session_info_update', title: 'Fix the parser' },
    ]);
    const state = ev({
      case: 'stateChanged',
      value: { state: { kind: StateKind.LLM_REQUESTING }, contextUsage: { usedTokens: 1200n, contextWindow: 200000n } },
    });
    expect(t.event(state)).toEqual([{ sessionUpdate: 'usage_update', used: 1200, size: 200000 }]);
    expect(t.event(state)).toEqual([]);
    expect(t.usageUpdate(1200, 200000, 450000n)).toEqual([
      { sessionUpdate: 'usage_update', used: 1200, size: 200000, cost: { amount: 0.45, currency: 'USD' } },
    ]);
    expect(sessionModes(Mode.RESTRICTED)).toMatchObject({
      currentModeId: 'restricted',
      availableModes: [
        { id: 'restricted', name: 'Restricted' },
        { id: 'unrestricted', name: 'Unrestricted' },
      ],
    });
  });

  it('ends a denied upgrade request failed, an approved one completed; the permission title is one sentence', () => {
    const t = new UpdateTranslator('/w');
    const call = (id: string) =>
      create(MessageSchema, {
        id: `a-${id}`,
        type: MessageType.AGENT,
        stopReason: StopReason.TOOL_USE,
        content: [{ block: { case: 'toolUse', value: { id, name: 'request_mode_upgrade', inputJson: '{"reason":"to write a file"}' } } }],
      });
    const result = (id: string, content: string) =>
      create(MessageSchema, {
        id: `t-${id}`,
        type: MessageType.TOOL,
        content: [{ block: { case: 'toolResult', value: { toolUseId: id, content } } }],
      });
    t.message(call('u1'), true);
    expect(t.message(result('u1', 'The user denied the upgrade. The conversation stays in Restricted mode.'), true)[0]).toMatchObject({
      status: 'failed',
    });
    t.message(call('u2'), true);
    expect(t.message(result('u2', 'The user approved the upgrade.'), true)[0]).toMatchObject({ status: 'completed' });
    expect(upgradeTitle('to write a file.')).toBe('The agent asks for write access (Unrestricted mode): to write a file. Allow it?');
    expect(upgradeTitle('')).toBe('The agent asks for write access (Unrestricted mode). Allow it?');
  });
});
