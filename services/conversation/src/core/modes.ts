/** Modes (REQ-BED-015): the user's answer to a mode upgrade the model asked for, and a downgrade. */
import { MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED, UPGRADE_APPROVED, UPGRADE_DENIED, rejection } from './constants.ts';
import type { Mode, ToolResult } from './types.ts';
import type { Draft, Outcome } from './draft.ts';
import { runTools } from './tool-calls.ts';

export function onUpgradeAnswer(d: Draft, approve: boolean): Outcome {
  const phase = d.phase;
  if (phase.kind !== 'awaiting_mode_approval') return rejection('no_pending_upgrade');
  // A denial is an answer, not a failure: the agent goes on in Restricted mode (REQ-BED-015).
  const answer: ToolResult = { toolUseId: phase.toolUseId, content: approve ? UPGRADE_APPROVED : UPGRADE_DENIED, isError: false };
  d.persistResult(answer);
  if (approve) changeMode(d, 'unrestricted');
  runTools(d, phase.remaining, [...phase.completed, answer], phase.total);
  return;
}

export function onDowngrade(d: Draft): Outcome {
  if (d.ctx.isSubAgent) return rejection('sub_agent_mode_fixed');
  if (!d.ctx.sandboxAvailable) return rejection('sandbox_unavailable');
  if (d.mode === 'restricted') return rejection('already_restricted');
  changeMode(d, 'restricted');
  return;
}

function changeMode(d: Draft, mode: Mode): void {
  const notice = mode === 'unrestricted' ? MODE_NOTICE_UNRESTRICTED : MODE_NOTICE_RESTRICTED;
  d.mode = mode;
  d.persist('system', [{ type: 'text', text: notice }]);
  d.notify({ kind: 'mode_changed', mode, notice });
}
