/**
 * auditRowsOf against the real state machine: which rows a transition writes, in order, and
 * in whose name.
 */
import { describe, expect, it } from '@jest/globals';
import { initialState, makeContext, transition, type ConversationEvent, type ConversationState } from '../core/index.ts';
import { auditRowsOf } from './audit-rows.ts';
import type { AuditActor } from '../store/audit-store.ts';

const ctx = makeContext({ conversationId: 'c1' });

/** Waiting for approval of u1 (reason "edit"), with a second request_mode_upgrade (u2) behind it. */
const awaiting: ConversationState = {
  ...initialState(ctx),
  seq: 3,
  llmRequests: 1,
  phase: {
    kind: 'awaiting_mode_approval',
    toolUseId: 'u1',
    reason: 'edit',
    remaining: [{ id: 'u2', name: 'request_mode_upgrade', input: { reason: 'really edit' } }],
    completed: [],
    total: 2,
  },
};

function rowsOf(state: ConversationState, event: ConversationEvent, actor?: AuditActor) {
  const result = transition(state, ctx, event);
  if (!result.ok) throw new Error(`rejected: ${result.rejection.code}`);
  return auditRowsOf({
    conversationId: 'c1',
    ownerId: 'owner',
    previous: state,
    next: result.state,
    event,
    effects: result.effects,
    ...(actor ? { actor } : {}),
  });
}

describe('auditRowsOf', () => {
  it('a denial followed, in the same transition, by the agent asking again: two rows, the answer first', () => {
    expect(rowsOf(awaiting, { type: 'user_deny_upgrade' }, { userId: 'owner', client: 'web' })).toEqual([
      {
        userId: 'owner',
        action: 'mode_upgrade_denied',
        conversationId: 'c1',
        details: { client: 'web', reason: 'edit', tool_use_id: 'u1' },
      },
      {
        userId: 'owner',
        action: 'mode_upgrade_requested',
        conversationId: 'c1',
        details: { by: 'agent', reason: 'really edit', tool_use_id: 'u2' },
      },
    ]);
  });

  it('an approval, then a downgrade; no client known: none recorded', () => {
    const approved = rowsOf(awaiting, { type: 'user_approve_upgrade' }, { userId: 'owner', client: '' });
    expect(approved.map((r) => [r.action, r.details])).toEqual([['mode_upgrade_approved', { reason: 'edit', tool_use_id: 'u1' }]]);
    const unrestricted = transition(awaiting, ctx, { type: 'user_approve_upgrade' });
    if (!unrestricted.ok) throw new Error('rejected');
    expect(rowsOf(unrestricted.state, { type: 'user_request_downgrade' }).map((r) => [r.userId, r.action, r.details])).toEqual([
      ['owner', 'mode_downgraded', { from: 'unrestricted', to: 'restricted' }],
    ]);
  });

  it('a cancel names what was cancelled; workers’ outcomes and messages write nothing', () => {
    expect(rowsOf(awaiting, { type: 'user_cancel' }, { userId: 'owner', client: 'cli' }).map((r) => [r.action, r.details])).toEqual([
      ['conversation_cancelled', { client: 'cli', phase: 'awaiting_mode_approval' }],
    ]);
    expect(rowsOf(initialState(ctx), { type: 'user_message', text: 'hi', images: [] }, { userId: 'owner', client: 'cli' })).toEqual([]);
  });
});
