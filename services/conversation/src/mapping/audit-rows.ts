/**
 * Which audit rows (docs/security.md "Audit") one applied transition writes: mode upgrade
 * requests and answers, downgrades, cancels. Pure: the applier writes them in the statement
 * that writes the new state (store.writeApplied), so neither commits without the other.
 */
import type { ConversationEvent, ConversationState, Effect } from '../core/index.ts';
import { clientDetails, type AuditAction, type AuditActor, type AuditRow } from '../store/audit-store.ts';

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
