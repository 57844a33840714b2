import { describe, expect, it } from '@jest/globals';
import { StateKind } from './gen/bedrock/v1/types_pb.ts';
import { FINISHED_STATE_NAMES, RESTING_STATE_NAMES, isFinished, isResting, stateKindName } from './states.ts';

const ALL = Object.values(StateKind).filter((v): v is StateKind => typeof v === 'number' && v !== StateKind.UNSPECIFIED);

describe('resting states', () => {
  it('names every public StateKind by its phase name', () => {
    expect(ALL.map(stateKindName)).toEqual([
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
    ]);
    expect(stateKindName(StateKind.UNSPECIFIED)).toBe('');
  });

  it('answers the same for a StateKind and its phase name', () => {
    for (const kind of ALL) {
      expect(isResting(kind)).toBe(isResting(stateKindName(kind)));
      expect(isFinished(kind)).toBe(isFinished(stateKindName(kind)));
    }
  });

  it('rests when nothing is in flight; approval and every working state are busy', () => {
    expect(ALL.filter((k) => isResting(k))).toEqual(
      [StateKind.CONTEXT_EXHAUSTED, StateKind.ERROR, StateKind.IDLE, StateKind.COMPLETED, StateKind.FAILED].sort((a, b) => a - b),
    );
    expect(isResting(StateKind.AWAITING_MODE_APPROVAL)).toBe(false);
    expect(isResting(StateKind.UNSPECIFIED)).toBe(false);
    expect(isResting('no_such_state')).toBe(false);
  });

  it('finished states are resting states', () => {
    for (const name of FINISHED_STATE_NAMES) expect(RESTING_STATE_NAMES).toContain(name);
    expect(ALL.filter((k) => isFinished(k)).map(stateKindName)).toEqual(['context_exhausted', 'completed', 'failed']);
  });
});
