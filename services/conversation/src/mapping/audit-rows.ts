/**
 * Which audit rows (migration 010, docs/security.md "Audit") one applied transition writes:
 * the agent's mode upgrade requests, the user's answers to them, downgrades and cancels. Pure:
 * the applier writes them with the new state in the same statement (store.writeApplied), so a
 * change of mode or a cancel never commits without its row, and a write that loses to another
 * replica writes none.
 */
import type { ConversationEvent, ConversationState, Effect } from '../core/index.ts';

/**
 * Every action the log records. `limit_changed` is kept for per-user limits and budgets (issue
 * 18, item 2): when admins can set them, the RPC that does writes this action with the old
 * and new values in the same transaction.
 */
export const AUDIT_ACTIONS = [
  'mode_upgrade_requested',
  'mode_upgrade_approved',
  'mode_upgrade_denied',
  'mode_downgraded',
  'conversation_cancelled',
  'conversation_deleted',
  'user_added',
  'user_disabled',
  'user_deleted',
  'token_issued',
  'token_revoked',
  'limit_changed',
  'conversation_rewound',
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who asked for a user action: the user web-bff named and the client it saw (empty: unknown). */
export interface AuditActor {
  readonly userId: string;
  readonly client: string;
}

export interface AuditRow {
  /** Who acted. */
  readonly userId: string;
  readonly action: AuditAction;
  readonly conversationId: string | null;
  readonly details: Readonly<Record<string, unknown>>;
}

/** The details every user action carries: the client it came from, when known. */
export function clientDetails(actor: AuditActor | undefined): Record<string, unknown> {
  return actor?.client ? { client: actor.client } : {};
}

export interface TransitionAudit {
  readonly conversationId: string;
  readonly ownerId: string;
  readonly previous: ConversationState;
  readonly next: ConversationState;
  readonly event: ConversationEvent;
  readonly effects: readonly Effect[];
  /** The caller of a user action; absent for workers' outcomes, timers and recovery. */
  readonly actor?: AuditActor;
}

/** The audit rows of a transition that changed the conversation (in the order they happened). */
export function auditRowsOf(t: TransitionAudit): AuditRow[] {
  const rows: AuditRow[] = [];
  const by = t.actor?.userId ?? t.ownerId;
  const row = (action: AuditAction, details: Record<string, unknown>, userId = by): AuditRow => ({
    userId,
    action,
    conversationId: t.conversationId,
    details: { ...clientDetails(t.actor), ...details },
  });
  const prev = t.previous.phase;
  switch (t.event.type) {
    case 'user_approve_upgrade':
    case 'user_deny_upgrade':
      if (prev.kind === 'awaiting_mode_approval') {
        rows.push(
          row(t.event.type === 'user_approve_upgrade' ? 'mode_upgrade_approved' : 'mode_upgrade_denied', {
            reason: prev.reason,
            tool_use_id: prev.toolUseId,
          }),
        );
      }
      break;
    case 'user_request_downgrade':
      if (t.previous.mode !== t.next.mode) rows.push(row('mode_downgraded', { from: t.previous.mode, to: t.next.mode }));
      break;
    case 'user_cancel':
      rows.push(row('conversation_cancelled', { phase: prev.kind }));
      break;
    default:
      break;
  }
  // The agent asks (the request_mode_upgrade tool): in its owner's name, from no client.
  for (const effect of t.effects) {
    if (effect.type === 'notify' && effect.notification.kind === 'mode_upgrade_requested') {
      rows.push({
        userId: t.ownerId,
        action: 'mode_upgrade_requested',
        conversationId: t.conversationId,
        details: { by: 'agent', reason: effect.notification.reason, tool_use_id: effect.notification.toolUseId },
      });
    }
  }
  return rows;
}
