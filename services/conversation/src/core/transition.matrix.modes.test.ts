/**
 * Transition matrix, spec 002 "Key Transitions" (modes): one case per row
 * (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED, UPGRADE_APPROVED, UPGRADE_DENIED } from './index.ts';
import { type Conv, approve, bash, deny, downgrade, patch, toolComplete, upgrade } from '../../test/core-support/matrix-fixtures.ts';
import { type Row, persisted, notes, effectsOf, resultFor, textOf, phase, runRow, cases } from '../../test/core-support/matrix-rows.ts';

// =============================================================================================
// spec 002, "Key Transitions" (4 rows, the downgrade row in three phases)

const SPEC_002_MODES: Row[] = [
  {
    label: '002 #1 ToolExecuting(request_mode_upgrade) + ModeUpgradeRequested → AwaitingModeApproval | NotifyClient, PersistState',
    setup: (c) => c.toTools([bash('t1'), upgrade('u1', 'to fix the bug')]),
    event: () => toolComplete('t1'),
    expect: {
      phase: 'awaiting_mode_approval',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(notes(r)[0]).toEqual({ kind: 'mode_upgrade_requested', toolUseId: 'u1', reason: 'to fix the bug' });
        expect(phase(r.state, 'awaiting_mode_approval')).toMatchObject({ toolUseId: 'u1', reason: 'to fix the bug', remaining: [] });
        expect(r.state.mode).toBe('restricted');
      },
    },
  },
  {
    label:
      '002 #2 AwaitingModeApproval + UserApproveUpgrade → ToolExecuting (continue) | SetMode(Unrestricted), InjectMessage, NotifyClient',
    setup: (c) => c.toTools([upgrade('u1'), patch('p1')]),
    event: () => approve,
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'notify', 'execute_tool'],
      check: (r) => {
        expect(r.state.mode).toBe('unrestricted');
        expect(resultFor(r, 'u1')).toMatchObject({ content: UPGRADE_APPROVED, isError: false });
        expect(textOf(persisted(r, 'system')[0]!)).toBe(MODE_NOTICE_UNRESTRICTED);
        expect(notes(r)[0]).toEqual({ kind: 'mode_changed', mode: 'unrestricted', notice: MODE_NOTICE_UNRESTRICTED });
        expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ toolUseId: 'p1', name: 'patch', mode: 'unrestricted' });
      },
    },
  },
  {
    label: '002 #3 AwaitingModeApproval + UserDenyUpgrade → ToolExecuting (continue) | ToolResult(denied), NotifyClient',
    setup: (c) => c.toTools([upgrade('u1'), bash('b1')]),
    event: () => deny,
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => {
        expect(r.state.mode).toBe('restricted');
        expect(resultFor(r, 'u1')).toMatchObject({ content: UPGRADE_DENIED, isError: false });
        expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ toolUseId: 'b1', mode: 'restricted' });
      },
    },
  },
  ...(
    [
      ['Idle', (c: Conv) => c.toUnrestricted(), 'idle'],
      ['ToolExecuting', (c: Conv) => c.toUnrestricted().toTools([bash('b1')]), 'tool_executing'],
      ['LlmRequesting', (c: Conv) => c.toUnrestricted().toLlm(), 'llm_requesting'],
    ] as const
  ).map(([name, setup, kind]): Row => ({
    label: `002 #4 Any (${name}) + UserRequestDowngrade → Same | SetMode(Restricted), InjectMessage, NotifyClient`,
    setup,
    event: () => downgrade,
    expect: {
      phase: kind,
      effects: ['persist_message', 'notify'],
      check: (r, _c, before) => {
        expect(before.mode).toBe('unrestricted');
        expect(r.state.mode).toBe('restricted');
        expect(textOf(persisted(r, 'system')[0]!)).toBe(MODE_NOTICE_RESTRICTED);
        expect(notes(r)[0]).toEqual({ kind: 'mode_changed', mode: 'restricted', notice: MODE_NOTICE_RESTRICTED });
        // The phase itself is untouched.
        expect(r.state.phase).toEqual(before.phase);
      },
    },
  })),
];

describe('spec 002 Key Transitions (modes)', () => {
  it.each(cases(SPEC_002_MODES))('%s', (_l, row) => runRow(row));
});
