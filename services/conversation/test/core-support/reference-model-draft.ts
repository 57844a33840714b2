/**
 * The reference model's draft of one accepted transition: the effects it emits (as tags), the
 * requests, tool calls and sub-agents it starts, and the delivery of waiting messages.
 */
import { toolSetFor } from '@bedrock/contracts/tools';
import type { ConversationContext, ErrorKind, Mode, ToolCall } from '../../src/core/types.ts';
import { requestIdOf, spawnTasks, subAgentIdOf } from './reference-model-state.ts';
import type { ModelOutcome, ModelPending, ModelPhase, ModelState } from './reference-model-state.ts';

const RUNNER_TOOLS: readonly string[] = ['bash', 'patch', 'keyword_search', 'think'];

/** A mutable draft of one accepted transition. */
export class Draft {
  phase: ModelPhase;
  mode: Mode;
  llmRequests: number;
  contextWarned: boolean;
  toolUses: string[];
  toolResults: string[];
  resultsUnspecified: boolean;
  pending: ModelPending[];
  delivered: string[];
  readonly seq: number;
  readonly effects: string[] = [];
  readonly optional: string[] = [];

  constructor(
    readonly ctx: ConversationContext,
    s: ModelState,
    readonly freshTimerId: string,
  ) {
    this.phase = s.phase;
    this.mode = s.mode;
    this.llmRequests = s.llmRequests;
    this.contextWarned = s.contextWarned;
    this.toolUses = [...s.toolUses];
    this.toolResults = [...s.toolResults];
    this.resultsUnspecified = s.resultsUnspecified;
    this.pending = [...s.pending];
    this.delivered = [...s.delivered];
    this.seq = s.seq + 1;
  }

  /** Persists the waiting steer and interrupt messages, in order; false when there was none. */
  deliverUrgent(): boolean {
    const urgent = this.pending.filter((m) => m.delivery !== 'queue');
    for (const m of urgent) {
      this.emit('persist:user');
      this.delivered.push(m.id);
    }
    this.pending = this.pending.filter((m) => m.delivery === 'queue');
    return urgent.length > 0;
  }

  emit(...tags: string[]): this {
    this.effects.push(...tags);
    return this;
  }

  allow(...tags: string[]): this {
    this.optional.push(...tags);
    return this;
  }

  nextRequestId(): string {
    this.llmRequests += 1;
    return requestIdOf(this.ctx, this.llmRequests);
  }

  persistResult(id: string): void {
    this.toolResults.push(id);
    this.emit('persist:tool');
  }

  /** The owner's budget is spent (the shell's figure in the context): no LLM request may go out. */
  budgetSpent(): boolean {
    const remaining = this.ctx.remainingBudgetMicros;
    return remaining !== null && remaining <= 0;
  }

  /** "Budget": instead of the request, an error message and notification; error budget_exhausted (S: failed). */
  stopForBudget(): void {
    this.emit('persist:error', 'notify:error');
    if (this.ctx.isSubAgent) this.fail('budget_exhausted');
    else this.phase = { kind: 'error', errorKind: 'budget_exhausted' };
  }

  /** → LLM: llm_requesting{attempt 1} + request_llm; with the budget spent, the turn stops instead. */
  toLlm(autoContinuations = 0, maxTokens = 0): void {
    if (this.budgetSpent()) return this.stopForBudget();
    this.phase = { kind: 'llm_requesting', requestId: this.nextRequestId(), attempt: 1, retryTimer: null, autoContinuations, maxTokens };
    this.emit('request_llm');
  }

  /** Starts the calls in order: immediate results are persisted and the next one starts at once. */
  runCalls(calls: readonly ToolCall[]): void {
    const tools: readonly string[] = toolSetFor(this.ctx);
    for (let i = 0; i < calls.length; i++) {
      const call = calls[i]!;
      const rest = calls.slice(i + 1);
      if (!tools.includes(call.name)) {
        this.persistResult(call.id);
        continue;
      }
      if (call.name === 'patch' && this.mode === 'restricted') {
        this.persistResult(call.id);
        continue;
      }
      if (RUNNER_TOOLS.includes(call.name)) {
        this.emit('execute_tool');
        this.phase = { kind: 'tool_executing', current: call, remaining: rest };
        return;
      }
      if (call.name === 'request_mode_upgrade') {
        if (this.mode === 'unrestricted') {
          this.persistResult(call.id);
          continue;
        }
        this.emit('notify:mode_upgrade_requested');
        this.phase = { kind: 'awaiting_mode_approval', toolUseId: call.id, remaining: rest };
        return;
      }
      if (call.name === 'spawn_agents') {
        const tasks = spawnTasks(call.input);
        if (tasks === null) {
          this.persistResult(call.id);
          continue;
        }
        for (let k = 0; k < tasks.length; k++) this.emit('spawn_sub_agent');
        this.emit('schedule_timer');
        this.phase = {
          kind: 'awaiting_sub_agents',
          spawnToolUseId: call.id,
          pending: tasks.map((_, k) => subAgentIdOf(this.ctx, call.id, k)),
          timerId: this.freshTimerId,
          remaining: rest,
        };
        return;
      }
      if (call.name === 'submit_result') {
        this.persistResult(call.id);
        for (const r of rest) this.persistResult(r.id);
        this.emit('notify_parent');
        this.phase = { kind: 'completed' };
        return;
      }
      // A name in the tool set that none of the rows covers: not reachable with contracts' tools.
      this.persistResult(call.id);
    }
    // A tool boundary: steering messages join the user turn of the results.
    this.deliverUrgent();
    this.toLlm();
  }

  /** A sub-agent fails: P never gets here. */
  fail(errorKind: ErrorKind | null): void {
    this.phase = { kind: 'failed', errorKind };
    this.emit('notify_parent');
  }

  done(): ModelOutcome {
    // At rest with messages waiting: the urgent ones together, else the first queued one (not
    // while the budget is spent: they wait).
    if (
      !this.ctx.isSubAgent &&
      (this.phase.kind === 'idle' || this.phase.kind === 'error') &&
      this.pending.length > 0 &&
      !this.budgetSpent()
    ) {
      if (!this.deliverUrgent()) {
        this.emit('persist:user');
        this.delivered.push(this.pending.shift()!.id);
      }
      this.toLlm();
    }
    return {
      kind: 'accepted',
      next: {
        phase: this.phase,
        mode: this.mode,
        fresh: false,
        llmRequests: this.llmRequests,
        contextWarned: this.contextWarned,
        toolUses: this.toolUses,
        toolResults: this.toolResults,
        resultsUnspecified: this.resultsUnspecified,
        seq: this.seq,
        pending: this.pending,
        delivered: this.delivered,
      },
      effects: this.effects,
      optional: this.optional,
    };
  }
}
