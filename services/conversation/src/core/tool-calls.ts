/**
 * The model's tool calls: run in order on tool-runners, or answered here (mode upgrade,
 * sub-agents, submit_result); tool results and sub-agent outcomes. Rows: docs/state-machine.md.
 */
import {
  PATCH_RESTRICTED_ERROR,
  TOOLS,
  isConversationToolName,
  isToolName,
  type ConversationToolName,
  type ToolName,
} from '@bedrock/contracts/tools';
import { isMcpToolName, mcpServerOf } from '@bedrock/contracts/mcp';
import { ALREADY_UNRESTRICTED } from './constants.ts';
import type { Mode, Phase, SubAgentOutcome, ToolCall, ToolResult } from './types.ts';
import { NOOP, errorResult, synthetic, unhandled, type Copies, type Draft, type Outcome } from './draft.ts';
import { toolNames } from './turn.ts';
import { deliverUrgent } from './user-input.ts';

type AwaitingSubAgents = Extract<Phase, { kind: 'awaiting_sub_agents' }>;
// Written-out copies of these phases below (see `Copies` in draft.ts).
const _awaitingSubAgentsCopied: Copies<
  AwaitingSubAgents,
  'kind' | 'spawnToolUseId' | 'agents' | 'pending' | 'outcomes' | 'timerId' | 'remaining' | 'completed' | 'total'
> = true;

export function onToolComplete(d: Draft, result: ToolResult): Outcome {
  const phase = d.phase;
  if (phase.kind !== 'tool_executing' || phase.current.id !== result.toolUseId) return NOOP;
  d.persistResult(result);
  runTools(d, phase.remaining, [...phase.completed, result], phase.total);
  return;
}

/**
 * Starts tool calls in order until one has to wait for someone else (a runner, the user,
 * sub-agents) or the conversation ends; when none is left the turn goes back to the model.
 * `done` is a new array the caller hands over (every caller builds it for this call): results
 * known at once are appended to it, and it becomes the next phase's `completed` without a copy.
 */
export function runTools(d: Draft, calls: readonly ToolCall[], done: ToolResult[], total: number): void {
  for (let i = 0; i < calls.length; i++) {
    const call = calls[i]!;
    const remaining = calls.slice(i + 1);
    const immediate = startTool(d, call, remaining, done, total);
    if (immediate === null) return;
    d.persistResult(immediate);
    done.push(immediate);
  }
  // A tool boundary: steering messages join the user turn that carries the results.
  if (d.pending.length > 0) deliverUrgent(d);
  d.phase = { kind: 'awaiting_llm' };
}

/** Starts one call: returns its result when it is known at once, or null when the phase now waits. */
function startTool(
  d: Draft,
  call: ToolCall,
  remaining: readonly ToolCall[],
  completed: readonly ToolResult[],
  total: number,
): ToolResult | null {
  const available = toolNames(d);
  // An MCP tool (`mcp__<server>__<tool>`) runs on a tool-runner, which knows the server's tools
  // and decides, from their annotations and the mode, whether it may run (docs/mcp.md).
  if (isMcpToolName(call.name) && mcpServerOf(call.name) !== undefined) {
    d.emit({ type: 'execute_tool', toolUseId: call.id, name: call.name, input: call.input, mode: d.mode });
    d.phase = { kind: 'tool_executing', current: call, remaining, completed, total };
    return null;
  }
  if (!isToolName(call.name) || !available.includes(call.name)) {
    return errorResult(call.id, `Unknown tool: ${call.name}. Available tools: ${toolList(available)}.`);
  }
  if (isConversationToolName(call.name)) return answerHere(d, call.name, call, remaining, completed, total);
  if (call.name === 'patch' && d.mode === 'restricted') return errorResult(call.id, PATCH_RESTRICTED_ERROR);
  // Every other registry tool runs on a tool-runner.
  d.emit({ type: 'execute_tool', toolUseId: call.id, name: call.name, input: call.input, mode: d.mode });
  d.phase = { kind: 'tool_executing', current: call, remaining, completed, total };
  return null;
}

/** A tool the state machine answers itself (`executor: 'conversation'` in the registry). */
function answerHere(
  d: Draft,
  name: ConversationToolName,
  call: ToolCall,
  remaining: readonly ToolCall[],
  completed: readonly ToolResult[],
  total: number,
): ToolResult | null {
  switch (name) {
    case 'request_mode_upgrade': {
      if (d.mode === 'unrestricted') return errorResult(call.id, ALREADY_UNRESTRICTED);
      const reason = typeof call.input.reason === 'string' ? call.input.reason.trim() : '';
      if (!reason) return errorResult(call.id, 'request_mode_upgrade needs a non-empty "reason" string.');
      d.notify({ kind: 'mode_upgrade_requested', toolUseId: call.id, reason });
      d.phase = { kind: 'awaiting_mode_approval', toolUseId: call.id, reason, remaining, completed, total };
      return null;
    }
    case 'spawn_agents':
      return spawnAgents(d, call, remaining, completed, total);
    case 'submit_result': {
      const result = typeof call.input.result === 'string' ? call.input.result : JSON.stringify(call.input.result ?? '');
      const success = typeof call.input.success === 'boolean' ? call.input.success : true;
      d.persistResult({ toolUseId: call.id, content: 'Result submitted.', isError: false });
      for (const skipped of remaining) {
        d.persistResult(synthetic(skipped.id, 'Skipped: the result was already submitted.'));
      }
      d.phase = { kind: 'completed', result, success };
      d.emit({
        type: 'notify_parent',
        parentId: d.ctx.parentId ?? '',
        outcome: { agentId: d.ctx.conversationId, task: '', success, result },
      });
      return null;
    }
    default:
      // Every conversation tool is answered above: one added to the registry fails to compile here.
      return unhandled(name);
  }
}

function spawnAgents(
  d: Draft,
  call: ToolCall,
  remaining: readonly ToolCall[],
  completed: readonly ToolResult[],
  total: number,
): ToolResult | null {
  const tasks = parseTasks(call.input.tasks);
  if (typeof tasks === 'string') return errorResult(call.id, tasks);
  // REQ-BED-018 (docs/design.md resolution 1): Restricted whenever the sandbox exists.
  const mode: Mode = d.ctx.sandboxAvailable ? 'restricted' : 'unrestricted';
  const agents = tasks.map((task, index) => ({ agentId: `${d.ctx.conversationId}--${call.id}--${index}`, task }));
  agents.forEach((agent, index) =>
    d.emit({ type: 'spawn_sub_agent', agentId: agent.agentId, task: agent.task, mode, spawnToolUseId: call.id, index }),
  );
  const timerId = d.newTimerId();
  d.emit({ type: 'schedule_timer', timerId, delayMs: d.ctx.policy.subAgentTimeoutMs, purpose: 'sub_agent_timeout' });
  d.phase = {
    kind: 'awaiting_sub_agents',
    spawnToolUseId: call.id,
    agents,
    pending: agents.map((a) => a.agentId),
    outcomes: [],
    timerId,
    remaining,
    completed,
    total,
  };
  return null;
}

const MAX_SUB_AGENTS = TOOLS.spawn_agents.inputSchema.properties?.tasks?.maxItems ?? 8;

function parseTasks(value: unknown): string[] | string {
  const expected = `spawn_agents needs "tasks": a list of 1 to ${MAX_SUB_AGENTS} objects like {"task": "..."}.`;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_SUB_AGENTS) return expected;
  const tasks: string[] = [];
  for (const item of value) {
    const task = typeof item === 'string' ? item : item && typeof item === 'object' ? (item as { task?: unknown }).task : undefined;
    if (typeof task !== 'string' || task.trim() === '') return expected;
    tasks.push(task);
  }
  return tasks;
}

export function onSubAgentResult(d: Draft, outcome: SubAgentOutcome): Outcome {
  const phase = d.phase;
  if (phase.kind !== 'awaiting_sub_agents' || !phase.pending.includes(outcome.agentId)) return NOOP;
  const task = phase.agents.find((a) => a.agentId === outcome.agentId)?.task ?? outcome.task;
  // `{ ...outcome, task }` written out (see `Copies`).
  const { agentId, success, result, errorKind } = outcome;
  const outcomes = [
    ...phase.outcomes,
    errorKind === undefined ? { agentId, task, success, result } : { agentId, task, success, result, errorKind },
  ];
  const pending = phase.pending.filter((id) => id !== agentId);
  d.notify({
    kind: 'sub_agent_progress',
    agentId: outcome.agentId,
    task,
    success: outcome.success,
    result: outcome.result,
    finishedCount: outcomes.length,
    totalCount: phase.agents.length,
  });
  if (pending.length > 0) {
    // `{ ...phase, pending, outcomes }` written out (see `Copies`).
    const { spawnToolUseId, agents, timerId, remaining, completed, total } = phase;
    d.phase = { kind: 'awaiting_sub_agents', spawnToolUseId, agents, pending, outcomes, timerId, remaining, completed, total };
    return;
  }
  d.emit({ type: 'cancel_timer', timerId: phase.timerId });
  finishSubAgents(d, phase, outcomes);
  return;
}

/** Every spawned agent is accounted for: aggregate, answer spawn_agents, go on (REQ-BED-008). */
export function finishSubAgents(d: Draft, phase: AwaitingSubAgents, outcomes: readonly SubAgentOutcome[]): void {
  const result: ToolResult = {
    toolUseId: phase.spawnToolUseId,
    content: formatOutcomes(phase.agents, outcomes),
    isError: outcomes.every((o) => !o.success),
  };
  d.persistResult(result);
  runTools(d, phase.remaining, [...phase.completed, result], phase.total);
}

export function formatOutcomes(agents: readonly { agentId: string; task: string }[], outcomes: readonly SubAgentOutcome[]): string {
  let failed = 0;
  for (const o of outcomes) if (!o.success) failed++;
  let text = `Sub-agent results: ${agents.length} spawned, ${agents.length - failed} succeeded, ${failed} failed.`;
  for (let i = 0; i < agents.length; i++) {
    const agent = agents[i]!;
    let outcome: SubAgentOutcome | undefined;
    for (const o of outcomes) {
      if (o.agentId === agent.agentId) {
        outcome = o;
        break;
      }
    }
    const status = !outcome ? 'NO RESULT' : outcome.success ? 'succeeded' : outcome.errorKind ? `FAILED (${outcome.errorKind})` : 'FAILED';
    text += `\n\n## Agent ${i + 1} (${agent.agentId}): ${status}\nTask: ${agent.task}\nResult: ${outcome ? outcome.result : ''}`;
  }
  return text;
}

/**
 * `available.join(', ')`, joined once per tool set: toolSetFor returns one of a few constant
 * lists, and the model's calls to unknown tools are common enough to show in the profile.
 */
const toolLists = new Map<readonly ToolName[], string>();
function toolList(available: readonly ToolName[]): string {
  let list = toolLists.get(available);
  if (list === undefined) toolLists.set(available, (list = available.join(', ')));
  return list;
}
