/**
 * Transition matrix, docs/state-machine.md "Starting a tool"
 * (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it, expect } from '@jest/globals';
import { PATCH_RESTRICTED_ERROR } from '@bedrock/contracts/tools';
import { ALREADY_UNRESTRICTED } from './index.ts';
import {
  CID,
  PARENT_ID,
  bash,
  call,
  downgrade,
  noSandboxCtx,
  patch,
  response,
  spawn,
  subCtx,
  submit,
  toolComplete,
  upgrade,
} from '../../test/core-support/matrix-fixtures.ts';
import { type Row, notes, effectsOf, resultFor, phase, P_TOOLS, runRow, cases } from '../../test/core-support/matrix-rows.ts';

// Starting a tool (docs/state-machine.md, "Starting a tool").
const DOC_TOOL_START: Row[] = [
  {
    label: 'tool start: unknown tool → immediate error "Unknown tool: X. Available tools: …"; next tool',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [call('f1', 'frobnicate'), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        const res = resultFor(r, 'f1');
        expect(res.isError).toBe(true);
        expect(res.content.startsWith('Unknown tool: frobnicate. Available tools: ')).toBe(true);
        for (const t of P_TOOLS) expect(res.content).toContain(t);
        expect(effectsOf(r, 'execute_tool')[0]!.toolUseId).toBe('b1');
      },
    },
  },
  {
    label: 'tool start: spawn_agents in a sub-agent (not in its tool set) → Unknown tool',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [spawn('s1', ['x']), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => expect(resultFor(r, 's1').content.startsWith('Unknown tool: spawn_agents.')).toBe(true),
    },
  },
  {
    label: 'tool start: submit_result in a parent → Unknown tool; none left → LLM in the same transition',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [submit('r1', 'x')] }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(resultFor(r, 'r1').content.startsWith('Unknown tool: submit_result.')).toBe(true),
    },
  },
  {
    label: 'tool start: request_mode_upgrade without a sandbox (not in the tool set) → Unknown tool',
    ctx: noSandboxCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [upgrade('u1')] }),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(resultFor(r, 'u1').content.startsWith('Unknown tool: request_mode_upgrade.')).toBe(true),
    },
  },
  {
    label: 'tool start: patch in Restricted → PATCH_RESTRICTED_ERROR without a runner; next tool',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [patch('p1'), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        expect(resultFor(r, 'p1')).toMatchObject({ content: PATCH_RESTRICTED_ERROR, isError: true });
        expect(effectsOf(r, 'execute_tool').map((e) => e.toolUseId)).toEqual(['b1']);
      },
    },
  },
  {
    label: 'tool start: patch after a downgrade mid-turn → PATCH_RESTRICTED_ERROR',
    setup: (c) =>
      c
        .toUnrestricted()
        .toTools([bash('b1'), patch('p1')])
        .ok(downgrade),
    event: () => toolComplete('b1'),
    expect: {
      phase: 'llm_requesting',
      effects: ['persist_message', 'persist_message', 'request_llm'],
      check: (r) => expect(resultFor(r, 'p1').content).toBe(PATCH_RESTRICTED_ERROR),
    },
  },
  {
    label: 'tool start: patch in Unrestricted → execute_tool{mode unrestricted}',
    ctx: noSandboxCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [patch('p1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'execute_tool'],
      check: (r) => expect(effectsOf(r, 'execute_tool')[0]).toMatchObject({ name: 'patch', mode: 'unrestricted' }),
    },
  },
  {
    label: 'tool start: request_mode_upgrade in Unrestricted → "Already in Unrestricted mode"; next tool',
    setup: (c) => c.toUnrestricted().toLlm(),
    event: (c) => response(c.requestId, { calls: [upgrade('u1'), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => expect(resultFor(r, 'u1')).toMatchObject({ content: ALREADY_UNRESTRICTED, isError: true }),
    },
  },
  {
    label: 'tool start: request_mode_upgrade in Restricted → awaiting_mode_approval | notify mode_upgrade_requested',
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [upgrade('u1', 'write tests'), bash('b1')] }),
    expect: {
      phase: 'awaiting_mode_approval',
      effects: ['persist_message', 'notify'],
      check: (r) => {
        expect(notes(r)[0]).toEqual({ kind: 'mode_upgrade_requested', toolUseId: 'u1', reason: 'write tests' });
        expect(phase(r.state, 'awaiting_mode_approval').remaining.map((x) => x.id)).toEqual(['b1']);
      },
    },
  },
  ...(
    [
      ['no tasks field', {}],
      ['empty task list', { tasks: [] }],
      ['empty task', { tasks: [{ task: '' }] }],
      ['tasks not an array', { tasks: 'do it' }],
    ] as const
  ).map(([name, input]): Row => ({
    label: `tool start: spawn_agents with invalid input (${name}) → immediate error result; next tool`,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [call('s1', 'spawn_agents', input as Record<string, unknown>), bash('b1')] }),
    expect: {
      phase: 'tool_executing',
      effects: ['persist_message', 'persist_message', 'execute_tool'],
      check: (r) => {
        const res = resultFor(r, 's1');
        expect(res.isError).toBe(true);
        expect(res.content).toContain('tasks');
      },
    },
  })),
  {
    label: 'tool start: spawn_agents from an Unrestricted parent → sub-agents still Restricted (sandbox available)',
    setup: (c) => c.toUnrestricted().toLlm(),
    event: (c) => response(c.requestId, { calls: [spawn('s1', ['a'])] }),
    expect: {
      phase: 'awaiting_sub_agents',
      effects: ['persist_message', 'spawn_sub_agent', 'schedule_timer'],
      check: (r) => expect(effectsOf(r, 'spawn_sub_agent')[0]!.mode).toBe('restricted'),
    },
  },
  {
    label: 'tool start: spawn_agents without a sandbox → sub-agents Unrestricted',
    ctx: noSandboxCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { calls: [spawn('s1', ['a'])] }),
    expect: {
      phase: 'awaiting_sub_agents',
      effects: ['persist_message', 'spawn_sub_agent', 'schedule_timer'],
      check: (r) => expect(effectsOf(r, 'spawn_sub_agent')[0]!.mode).toBe('unrestricted'),
    },
  },
  {
    label: 'tool start: submit_result (S) → completed | "Result submitted.", skipped results for the rest, notify_parent{success, result}',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: (c) => response(c.requestId, { text: 'done', calls: [submit('r1', 'the answer'), bash('b1')] }),
    expect: {
      phase: 'completed',
      effects: ['persist_message', 'persist_message', 'persist_message', 'notify_parent'],
      check: (r) => {
        expect(phase(r.state, 'completed')).toEqual({ kind: 'completed', result: 'the answer', success: true });
        expect(resultFor(r, 'r1')).toMatchObject({ content: 'Result submitted.', isError: false });
        expect(resultFor(r, 'b1')).toMatchObject({ isError: true, cancelled: true });
        expect(effectsOf(r, 'notify_parent')[0]).toMatchObject({
          parentId: PARENT_ID,
          outcome: { agentId: CID, success: true, result: 'the answer' },
        });
      },
    },
  },
  {
    label: 'tool start: submit_result{success: false} (S) → completed, notify_parent success false',
    ctx: subCtx,
    setup: (c) => c.toTools([bash('b1'), submit('r1', 'gave up', false)]),
    event: () => toolComplete('b1'),
    expect: {
      phase: 'completed',
      effects: ['persist_message', 'persist_message', 'notify_parent'],
      check: (r) => expect(effectsOf(r, 'notify_parent')[0]!.outcome).toMatchObject({ success: false, result: 'gave up' }),
    },
  },
];

describe('docs/state-machine.md: starting a tool', () => {
  it.each(cases(DOC_TOOL_START))('%s', (_l, row) => runRow(row));
});
