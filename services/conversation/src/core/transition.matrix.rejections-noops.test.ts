/**
 * Transition matrix, docs/state-machine.md lines the spec tables do not cover: rejections, and
 * no-ops that return the same state object (runner: test/core-support/matrix-rows.ts).
 */
import { describe, it } from '@jest/globals';
import {
  CID,
  approve,
  bash,
  deny,
  downgrade,
  llmError,
  noSandboxCtx,
  response,
  spawn,
  subAgentResult,
  subAgentStart,
  subAgentStop,
  subCtx,
  submit,
  timerFired,
  toolComplete,
  triggerContinuation,
  upgrade,
  userCancel,
  userMessage,
  workLost,
} from '../../test/core-support/matrix-fixtures.ts';
import { type Row, runRow, cases, IMG } from '../../test/core-support/matrix-rows.ts';

// =============================================================================================
// docs/state-machine.md lines the spec tables do not cover

const DOC_REJECTIONS: Row[] = [
  {
    label: 'doc: idle + user_message with no text and no images → reject empty_message',
    setup: () => {},
    event: () => userMessage(''),
    expect: { reject: 'empty_message' },
  },
  {
    label: 'doc: idle + user_message with only an image → LLM',
    setup: () => {},
    event: () => userMessage('', [IMG]),
    expect: { phase: 'llm_requesting', effects: ['persist_message', 'request_llm'] },
  },
  {
    label: 'doc: llm_requesting (retry pending) + user_message → agent_busy',
    setup: (c) => c.retryPending(),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: 'doc: awaiting_mode_approval + user_message → agent_busy',
    setup: (c) => c.toTools([upgrade('u1')]),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: 'doc: awaiting_continuation + user_message → agent_busy',
    setup: (c) => c.toContinuation(),
    event: () => userMessage(),
    expect: { reject: 'agent_busy' },
  },
  {
    label: 'doc: S idle + user_message → sub_agent_driven_by_parent',
    ctx: subCtx,
    setup: () => {},
    event: () => userMessage(),
    expect: { reject: 'sub_agent_driven_by_parent' },
  },
  {
    label: 'doc: S llm_requesting + user_message → sub_agent_driven_by_parent',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => userMessage(),
    expect: { reject: 'sub_agent_driven_by_parent' },
  },
  {
    label: 'doc: S completed + user_message → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toTools([submit('r1', 'answer')]),
    event: () => userMessage(),
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: S failed + user_message → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toLlm().ok(userCancel),
    event: () => userMessage(),
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: S completed + user_cancel → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toTools([submit('r1', 'a')]),
    event: () => userCancel,
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: S failed + user_approve_upgrade → conversation_finished',
    ctx: subCtx,
    setup: (c) => c.toLlm().ok(userCancel),
    event: () => approve,
    expect: { reject: 'conversation_finished' },
  },
  {
    label: 'doc: idle + user_cancel → nothing_to_cancel',
    setup: () => {},
    event: () => userCancel,
    expect: { reject: 'nothing_to_cancel' },
  },
  {
    label: 'doc: error + user_cancel → nothing_to_cancel',
    setup: (c) => c.toError(),
    event: () => userCancel,
    expect: { reject: 'nothing_to_cancel' },
  },
  {
    label: 'doc: idle + user_approve_upgrade → no_pending_upgrade',
    setup: () => {},
    event: () => approve,
    expect: { reject: 'no_pending_upgrade' },
  },
  {
    label: 'doc: tool_executing + user_deny_upgrade → no_pending_upgrade',
    setup: (c) => c.toTools([bash('b1')]),
    event: () => deny,
    expect: { reject: 'no_pending_upgrade' },
  },
  {
    label: 'doc: P restricted + user_request_downgrade → already_restricted',
    setup: () => {},
    event: () => downgrade,
    expect: { reject: 'already_restricted' },
  },
  {
    label: 'doc: P no sandbox + user_request_downgrade → sandbox_unavailable',
    ctx: noSandboxCtx,
    setup: () => {},
    event: () => downgrade,
    expect: { reject: 'sandbox_unavailable' },
  },
  {
    label: 'doc: S + user_request_downgrade → sub_agent_mode_fixed',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => downgrade,
    expect: { reject: 'sub_agent_mode_fixed' },
  },
  {
    label: 'doc: llm_requesting + user_trigger_continuation → continuation_unavailable',
    setup: (c) => c.toLlm(),
    event: () => triggerContinuation,
    expect: { reject: 'continuation_unavailable' },
  },
  {
    label: 'doc: tool_executing + user_trigger_continuation → continuation_unavailable',
    setup: (c) => c.toTools([bash('b1')]),
    event: () => triggerContinuation,
    expect: { reject: 'continuation_unavailable' },
  },
  {
    label: 'doc: S + user_trigger_continuation → continuation_unavailable',
    ctx: subCtx,
    setup: () => {},
    event: () => triggerContinuation,
    expect: { reject: 'continuation_unavailable' },
  },
];

const DOC_NOOPS: Row[] = [
  {
    label: 'doc no-op: S llm_requesting + sub_agent_start (not seq 0)',
    ctx: subCtx,
    setup: (c) => c.toLlm(),
    event: () => subAgentStart(),
    expect: { noop: true },
  },
  { label: 'doc no-op: P idle + sub_agent_start', setup: () => {}, event: () => subAgentStart(), expect: { noop: true } },
  {
    label: 'doc no-op: llm_requesting + llm_response for another request',
    setup: (c) => c.toLlm(),
    event: () => response(`${CID}/llm/99`, { text: 'x' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + late llm_response to the failed attempt',
    setup: (c) => c.retryPending(),
    event: () => response(`${CID}/llm/1`, { text: 'late' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + llm_response to the next attempt (nothing in flight)',
    setup: (c) => c.retryPending(),
    event: (c) => response(c.requestId, { text: 'early' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + late llm_error to the failed attempt',
    setup: (c) => c.retryPending(),
    event: () => llmError(`${CID}/llm/1`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (retry pending) + timer_fired not matching',
    setup: (c) => c.retryPending(),
    event: () => timerFired(`${CID}/timer/999`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: llm_requesting (in flight) + the retry timer fired again (duplicate)',
    setup: (c) => {
      c.retryPending();
      c.ok(timerFired(c.timer('retry')));
    },
    event: (c) => timerFired(c.timer('retry')),
    expect: { noop: true },
  },
  { label: 'doc no-op: cancelling + user_cancel', setup: (c) => c.toCancelling(), event: () => userCancel, expect: { noop: true } },
  {
    label: 'doc no-op: cancelling + llm_response for another request',
    setup: (c) => c.toCancelling(),
    event: () => response(`${CID}/llm/99`, { text: 'x' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: cancelling + timer_fired not matching',
    setup: (c) => c.toCancelling(),
    event: () => timerFired(`${CID}/timer/999`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: tool_executing + tool_complete for a later call (out of order)',
    setup: (c) => c.toTools([bash('t1'), bash('t2')]),
    event: () => toolComplete('t2'),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: tool_executing + duplicate tool_complete of a finished call',
    setup: (c) => c.toTools([bash('t1'), bash('t2')]).ok(toolComplete('t1')),
    event: () => toolComplete('t1'),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: idle + tool_complete (stale)',
    setup: (c) => c.toTools([bash('t1')]).ok(userCancel),
    event: () => toolComplete('t1'),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_sub_agents + sub_agent_result from an unknown agent',
    setup: (c) => c.toTools([spawn('s1', ['a', 'b'])]),
    event: () => subAgentResult(`${CID}--s9--0`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_sub_agents + duplicate sub_agent_result',
    setup: (c) => c.toTools([spawn('s1', ['a', 'b'])]).ok(subAgentResult(`${CID}--s1--0`)),
    event: () => subAgentResult(`${CID}--s1--0`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_sub_agents + timer_fired not matching',
    setup: (c) => c.toTools([spawn('s1', ['a'])]),
    event: () => timerFired(`${CID}/timer/999`),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: awaiting_mode_approval + work_lost (survives restarts)',
    setup: (c) => c.toTools([upgrade('u1')]),
    event: () => workLost,
    expect: { noop: true },
  },
  { label: 'doc no-op: idle + work_lost', setup: () => {}, event: () => workLost, expect: { noop: true } },
  { label: 'doc no-op: error + work_lost', setup: (c) => c.toError(), event: () => workLost, expect: { noop: true } },
  {
    label: 'doc no-op: tool_executing + work_lost whose atSeq is not the state seq (an answer arrived after recovery looked)',
    setup: (c) => c.toTools([bash('b1'), bash('b2')]),
    event: (c) => ({ ...workLost, atSeq: c.state.seq - 1 }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: S completed + llm_response',
    ctx: subCtx,
    setup: (c) => c.toTools([submit('r1', 'a')]),
    event: () => response(`${CID}/llm/1`, { text: 'x' }),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: S failed + timer_fired',
    ctx: subCtx,
    setup: (c) => c.retryPending().ok(subAgentStop),
    event: (c) => timerFired(c.timer('retry')),
    expect: { noop: true },
  },
  {
    label: 'doc no-op: S failed + sub_agent_stop',
    ctx: subCtx,
    setup: (c) => c.toLlm().ok(subAgentStop),
    event: () => subAgentStop,
    expect: { noop: true },
  },
  { label: 'doc no-op: P + sub_agent_stop', setup: (c) => c.toLlm(), event: () => subAgentStop, expect: { noop: true } },
];

describe('docs/state-machine.md: rejections', () => {
  it.each(cases(DOC_REJECTIONS))('%s', (_l, row) => runRow(row));
});
describe('docs/state-machine.md: no-ops return the same state object', () => {
  it.each(cases(DOC_NOOPS))('%s', (_l, row) => runRow(row));
});
