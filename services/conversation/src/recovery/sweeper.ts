/**
 * Recovery (REQ-BED-007, docs/design.md resolution 3 and "Side effects after a crash";
 * docs/conversation.md, "Recovery: crashes and lost work"): no conversation stays busy forever
 * when the work it waits on is lost — a worker that crashed after taking a job it can no longer
 * hand back, or a Redis restart that dropped jobs — and no real result is replaced by a synthetic
 * one. Waiting for the user (mode approval) is never "lost". Several replicas may sweep at once.
 */
import { create, fromJsonString } from '@bufbuild/protobuf';
import {
  ConversationEventJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  ToolCompleteEventSchema,
  llmResultEventId,
  llmRequestJobId,
  llmRunKey,
  subAgentStartEventId,
  toolExecJobId,
  toolResultEventId,
  toolRunKey,
} from '@bedrock/contracts';
import type { JobStatus, Queues, RunLedger } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';
import type { ConversationEvent, Phase } from '../core/index.ts';
import { decodeEventJob } from '../mapping/proto.ts';
import type { Applier } from '../apply/applier.ts';
import type { ConversationRecord, ConversationStore } from '../store/conversation-store.ts';

export interface RecoveryOptions {
  readonly store: ConversationStore;
  readonly applier: Applier;
  readonly queues: Pick<Queues, 'jobStatus'>;
  /** Heartbeats and recorded results of running work. */
  readonly runs: Pick<RunLedger, 'get' | 'isAlive'>;
  readonly logger: Logger;
  /** Between sweeps, ms. */
  readonly intervalMs: number;
  /**
   * Only conversations whose state has not changed for this long are examined, and work counts
   * as lost only when it still looks gone this long after it was first seen gone (heartbeats come
   * back within seconds after a Redis restart), ms.
   */
  readonly staleAfterMs: number;
  /** Clock (tests). */
  readonly now?: () => number;
}

export interface RecoverySweeper {
  /**
   * One pass over the busy conversations whose state has not moved for `staleAfterMs`; returns
   * the conversations it moved. A tool call whose result is recorded in the run ledger gets that
   * result. Work that is gone, and still looks gone `staleAfterMs` later, gets `work_lost`
   * (synthetic results, back to idle, history intact), naming the state it was decided on
   * (`atSeq`): an answer that arrived meanwhile wins.
   */
  sweep(): Promise<string[]>;
  start(): void;
  stop(): Promise<void>;
}

/** What recovery concludes about the work a conversation waits on. */
type Verdict =
  | { readonly kind: 'pending'; readonly why: string }
  | { readonly kind: 'lost' }
  | { readonly kind: 'result'; readonly event: ConversationEvent };

const PENDING = new Set<JobStatus['state']>(['waiting', 'delayed', 'active']);

export function createRecoverySweeper(options: RecoveryOptions): RecoverySweeper {
  const { store, applier, queues, runs, logger } = options;
  const now = options.now ?? Date.now;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;
  let stopped = true;
  // `<conversation>@<seq>` → when its work was first seen gone.
  let suspects = new Map<string, number>();

  async function pending(queue: string, jobId: string): Promise<boolean> {
    return PENDING.has((await queues.jobStatus(queue, jobId)).state);
  }

  async function examineTool(record: ConversationRecord, toolUseId: string): Promise<Verdict> {
    // First the cheap look that answers the common case (a tool still running: one EXISTS).
    // Then, in the order of the runner's steps backwards (claim, run, record the result, send
    // it, complete the job), so that no answer can slip between two looks.
    const key = toolRunKey(record.id, toolUseId);
    if (await runs.isAlive(key)) return { kind: 'pending', why: 'tool running' };
    // The job went to the queue of the mode it ran in; the mode may have changed since.
    const jobId = toolExecJobId(record.id, toolUseId);
    if ((await pending(QUEUE_TOOL_EXEC, jobId)) || (await pending(QUEUE_TOOL_EXEC_RESTRICTED, jobId)))
      return { kind: 'pending', why: 'tool job' };
    if (await pending(QUEUE_CONVERSATION_EVENTS, toolResultEventId(record.id, toolUseId))) return { kind: 'pending', why: 'result queued' };
    const run = await runs.get(key);
    if (run?.state === 'finished' && run.result) {
      const result = fromJsonString(ToolCompleteEventSchema, run.result, { ignoreUnknownFields: true });
      const decoded = decodeEventJob(
        create(ConversationEventJobSchema, { conversationId: record.id, event: { case: 'toolComplete', value: result } }),
      );
      if (decoded.kind === 'event') return { kind: 'result', event: decoded.event };
    }
    if (run?.alive) return { kind: 'pending', why: 'tool running' };
    return { kind: 'lost' };
  }

  async function examineLlm(requestId: string): Promise<Verdict> {
    // A gateway marks a request alive until its answer is sent, so looking at the answer after
    // the job cannot miss one; the heartbeat first, as the cheap look for the common case.
    if (await runs.isAlive(llmRunKey(requestId))) return { kind: 'pending', why: 'llm request running' };
    if (await pending(QUEUE_LLM_REQUESTS, llmRequestJobId(requestId))) return { kind: 'pending', why: 'llm job' };
    if (await pending(QUEUE_CONVERSATION_EVENTS, llmResultEventId(requestId))) return { kind: 'pending', why: 'result queued' };
    return { kind: 'lost' };
  }

  async function examineTimer(timerId: string): Promise<Verdict> {
    return (await pending(QUEUE_CONVERSATION_EVENTS, timerId)) ? { kind: 'pending', why: 'timer' } : { kind: 'lost' };
  }

  /**
   * Where the work the phase waits on is; null when it waits on nothing that can be lost. It is
   * pending while any of these holds:
   *   - the job is queued, delayed or running (a dead consumer's job stays "running" until the
   *     queue's stalled check hands it to another consumer, seconds later);
   *   - its answer is queued on `conversation-events` (`tool-result/…`, `llm-result/…`), or being
   *     applied;
   *   - its owner's heartbeat in the run ledger is current (a tool or an LLM request still being
   *     worked on, e.g. after Redis lost the job but not the worker).
   */
  async function examine(record: ConversationRecord, phase: Phase): Promise<Verdict | null> {
    switch (phase.kind) {
      case 'llm_requesting':
      case 'awaiting_continuation':
        return phase.retry ? examineTimer(phase.retry.timerId) : examineLlm(phase.requestId);
      case 'tool_executing':
        return examineTool(record, phase.current.id);
      case 'cancelling': {
        // Waiting for the gateway's acknowledgement, or the timer that gives up on it.
        const timer = await examineTimer(phase.timerId);
        return timer.kind === 'pending' ? timer : examineLlm(phase.requestId);
      }
      default:
        return null;
    }
  }

  async function apply(id: string, event: ConversationEvent): Promise<boolean> {
    // The applier publishes the effects (a stopped sub-agent's rows too) before it returns.
    return (await applier.apply(id, event)).kind === 'applied';
  }

  /** A parent waits on children: re-deliver results of finished ones, fail those that never started. */
  async function recoverSubAgents(record: ConversationRecord, phase: Extract<Phase, { kind: 'awaiting_sub_agents' }>): Promise<boolean> {
    let moved = false;
    for (const agentId of phase.pending) {
      const child = await store.get(agentId);
      let event: ConversationEvent | null = null;
      if (child?.state.phase.kind === 'completed') {
        const p = child.state.phase;
        event = { type: 'sub_agent_result', outcome: { agentId, task: '', success: p.success, result: p.result } };
      } else if (child?.state.phase.kind === 'failed') {
        const p = child.state.phase;
        event = { type: 'sub_agent_result', outcome: { agentId, task: '', success: false, result: p.error, errorKind: p.errorKind } };
      } else if (!child && !(await pending(QUEUE_CONVERSATION_EVENTS, subAgentStartEventId(agentId)))) {
        event = {
          type: 'sub_agent_result',
          outcome: { agentId, task: '', success: false, result: 'The sub-agent never started: its start was lost.', errorKind: 'unknown' },
        };
      }
      if (event && (await apply(record.id, event))) moved = true;
    }
    return moved;
  }

  async function sweep(): Promise<string[]> {
    const moved: string[] = [];
    const seen = new Map<string, number>();
    for (const record of await store.staleBusy(options.staleAfterMs, 200)) {
      try {
        const phase = record.state.phase;
        if (phase.kind === 'awaiting_sub_agents') {
          if (!(await store.hasUnsentOutbox(record.id)) && (await recoverSubAgents(record, phase))) moved.push(record.id);
          continue;
        }
        const verdict = await examine(record, phase);
        if (!verdict || verdict.kind === 'pending') continue;
        // Unsent effects are not lost: the relay will publish them.
        if (await store.hasUnsentOutbox(record.id)) continue;
        if (verdict.kind === 'result') {
          // A no-op when the answer was applied since the state was read.
          if (await apply(record.id, verdict.event)) {
            logger.warn({ conversation_id: record.id, phase: phase.kind }, 'applied the result the runner recorded; its answer was lost');
            moved.push(record.id);
          }
          continue;
        }
        const suspect = `${record.id}@${record.state.seq}`;
        const since = suspects.get(suspect) ?? now();
        seen.set(suspect, since);
        if (now() - since < options.staleAfterMs) continue;
        logger.warn({ conversation_id: record.id, phase: phase.kind }, 'the work this conversation waits on is lost; recovering');
        if (await apply(record.id, { type: 'work_lost', reason: `lost while ${phase.kind}`, atSeq: record.state.seq }))
          moved.push(record.id);
      } catch (err) {
        logger.warn({ err, conversation_id: record.id }, 'recovery check failed');
      }
    }
    // Suspects that moved on (or were not looked at) start over if they come back.
    suspects = seen;
    return moved;
  }

  async function loop(): Promise<void> {
    if (stopped) return;
    running = sweep().catch((err) => logger.warn({ err }, 'recovery sweep failed'));
    await running;
    running = null;
    if (!stopped) timer = setTimeout(() => void loop(), options.intervalMs);
  }

  return {
    sweep,
    start() {
      stopped = false;
      timer = setTimeout(() => void loop(), options.intervalMs);
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
