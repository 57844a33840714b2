import { describe, expect, it } from '@jest/globals';
import {
  llmRequestJobId,
  llmResultEventId,
  llmRunKey,
  subAgentResultEventId,
  subAgentStartEventId,
  subAgentStopEventId,
  toolExecJobId,
  toolResultEventId,
  toolRunKey,
} from './queues.ts';

describe('cross-service ids', () => {
  it('keep the layout that queued jobs and stored run keys already use (changing one orphans them)', () => {
    expect(toolExecJobId('c1', 'tu1')).toBe('c1/tu1');
    expect(toolResultEventId('c1', 'tu1')).toBe('tool-result/c1/tu1');
    expect(toolRunKey('c1', 'tu1')).toBe('tool/c1/tu1');
    expect(llmRequestJobId('r1')).toBe('r1');
    expect(llmResultEventId('r1')).toBe('llm-result/r1');
    expect(llmRunKey('r1')).toBe('llm/r1');
    expect(subAgentStartEventId('a1')).toBe('start/a1');
    expect(subAgentStopEventId('a1')).toBe('stop/a1');
    expect(subAgentResultEventId('a1')).toBe('result/a1');
  });
});
