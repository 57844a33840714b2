/**
 * `history_rewound` (a RewindConversation with the history, docs/workspaces.md "Checkpoints")
 * in the CLI's watch/chat output and in the ACP bridge: said once, in words, where the printed
 * history cannot be taken back.
 */
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, type ConversationEvent } from '@bedrock/contracts';
import { createEventRenderer } from '../src/render.ts';
import { UpdateTranslator } from '../src/acp/updates.ts';

const ev = (kind: unknown): ConversationEvent => create(ConversationEventSchema, { conversationId: 'c', kind } as never);
const rewound = ev({ case: 'historyRewound', value: { through: 4n } });

describe('history_rewound', () => {
  it('is a status line in watch/chat output, after the streamed text ends', () => {
    let out = '';
    let err = '';
    const render = createEventRenderer({ out: (t) => void (out += t), err: (t) => void (err += t) }, {});
    render(ev({ case: 'tokenDelta', value: { requestId: 'r', text: 'Half an answer' } }));
    render(rewound);
    expect(out).toBe('Half an answer\n');
    expect(err).toBe('· history rewound: messages after #4 were removed; new ones are numbered from #5\n');
  });

  it('is a note in the agent text over ACP', () => {
    expect(new UpdateTranslator('/w').event(rewound)).toEqual([
      {
        sessionUpdate: 'agent_message_chunk',
        content: { type: 'text', text: '\n\nNote: the history was rewound; the messages after #4 were removed.\n\n' },
      },
    ]);
  });
});
