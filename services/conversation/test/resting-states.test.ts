/**
 * "Which states are at rest" is one list (RESTING_STATE_NAMES in @bedrock/contracts). The SQL that
 * finds busy conversations is built from it; migration 001's partial index spells it out, and
 * must stay equal (same states, same order) for the planner to use the index.
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { RESTING_STATE_NAMES, StateKind, isResting } from '@bedrock/contracts';
import { stateKindToProto } from '../src/mapping/proto.ts';
import { BUSY_STATE_SQL } from '../src/store/conversation-store.ts';
import type { PhaseKind } from '../src/core/index.ts';

const migration = readFileSync(new URL('../src/db/migrations/001_initial.sql', import.meta.url), 'utf8');

describe('resting states', () => {
  it("migration 001's busy index has the predicate the sweeper's query uses", () => {
    const index = /CREATE INDEX conversations_busy_idx[^;]*WHERE (state_kind NOT IN \([^)]*\));/.exec(migration);
    expect(index?.[1]).toBe(BUSY_STATE_SQL);
    expect(BUSY_STATE_SQL).toBe(`state_kind NOT IN (${RESTING_STATE_NAMES.map((s) => `'${s}'`).join(', ')})`);
  });

  it('a phase and its public StateKind agree on being at rest', () => {
    const phases: PhaseKind[] = [
      'idle',
      'awaiting_llm',
      'llm_requesting',
      'tool_executing',
      'cancelling',
      'awaiting_sub_agents',
      'awaiting_mode_approval',
      'awaiting_continuation',
      'context_exhausted',
      'error',
      'completed',
      'failed',
    ];
    for (const phase of phases) expect([phase, isResting(stateKindToProto(phase))]).toEqual([phase, isResting(phase)]);
    expect(isResting(StateKind.IDLE)).toBe(true);
  });
});
