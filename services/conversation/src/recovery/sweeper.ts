/**
 * Recovery (REQ-BED-007, DESIGN.md resolution 3): no conversation stays busy forever when the
 * work it waits on is lost — a worker that crashed after taking a job it can no longer hand
 * back, or a Redis restart that dropped jobs. The sweeper looks at busy conversations whose
 * state has not moved for a while, asks the queues whether what they wait on still exists,
 * and applies `work_lost` when it does not: the state machine then records synthetic results
 * and returns to idle with the history intact. Waiting for the user (mode approval) is never
 * "lost". Several replicas may sweep at once: applying work_lost twice is a no-op.
 */
import {
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
} from '@bedrock/contracts';
import type { JobStatus, Queues } from '@bedrock/platform';
import type { Logger } from '@bedrock/platform/server';
import type { ConversationEvent, Phase } from '../core/index.ts';
import type { OutboxRelay } from '../outbox/relay.ts';
import type { ConversationRecord, ConversationStore } from '../store/conversation-store.ts';

export interface RecoveryOptions {
  readonly store: ConversationStore;
  readonly relay: OutboxRelay;
  readonly queues: Pick<Queues, 'jobStatus'>;
  readonly logger: Logger;
  /** Between sweeps, ms. */
  readonly intervalMs: number;
  /** Only conversations whose state has not changed for this long are examined, ms. */
  readonly staleAfterMs: number;
}

export interface RecoverySweeper {
  /** One pass; returns the conversations it moved. */
  sweep(): Promise<string[]>;
  start(): void;
  stop(): Promise<void>;
}

/** A job that is neither queued, running nor delayed — or finished long enough ago that its answer should have arrived. */
function gone(status: JobStatus, staleAfterMs: number, now: number): boolean {
  if (status.state === 'unknown') return true;
  if (status.state === 'completed' || status.state === 'failed') {
    return status.finishedAt === null || now - status.finishedAt > staleAfterMs;
  }
  return false;
}

export function createRecoverySweeper(options: RecoveryOptions): RecoverySweeper {
  const { store, relay, queues, logger } = options;
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;
  let stopped = true;

  async function allGone(jobs: readonly [string, string][]): Promise<boolean> {
    const now = Date.now();
    for (const [queue, jobId] of jobs) {
      if (!gone(await queues.jobStatus(queue, jobId), options.staleAfterMs, now)) return false;
    }
    return true;
  }

  /** What the phase waits on, as (queue, job id) pairs; null when it waits on nothing lost-able. */
  function awaited(record: ConversationRecord, phase: Phase): [string, string][] | null {
    switch (phase.kind) {
      case 'llm_requesting':
      case 'awaiting_continuation':
        return phase.retry ? [[QUEUE_CONVERSATION_EVENTS, phase.retry.timerId]] : [[QUEUE_LLM_REQUESTS, phase.requestId]];
      case 'tool_executing': {
        // The job went to the queue of the mode it ran in; the mode may have changed since.
        const jobId = `${record.id}/${phase.current.id}`;
        return [
          [QUEUE_TOOL_EXEC, jobId],
          [QUEUE_TOOL_EXEC_RESTRICTED, jobId],
        ];
      }
      case 'cancelling':
        return [[QUEUE_CONVERSATION_EVENTS, phase.timerId]];
      default:
        return null;
    }
  }

  async function apply(id: string, event: ConversationEvent): Promise<boolean> {
    const result = await store.applyEvent(id, event);
    if (result.kind !== 'applied') return false;
    // Recovery can stop sub-agents: their rows belong to them, so publish each conversation's.
    for (const conversationId of result.outboxConversations) await relay.kick(conversationId);
    return true;
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
      } else if (!child && (await allGone([[QUEUE_CONVERSATION_EVENTS, `start/${agentId}`]]))) {
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
    for (const record of await store.staleBusy(options.staleAfterMs, 200)) {
      try {
        // Unsent effects are not lost: the relay will publish them.
        if (await store.hasUnsentOutbox(record.id)) continue;
        const phase = record.state.phase;
        if (phase.kind === 'awaiting_sub_agents') {
          if (await recoverSubAgents(record, phase)) moved.push(record.id);
          continue;
        }
        const jobs = awaited(record, phase);
        if (!jobs || !(await allGone(jobs))) continue;
        logger.warn({ conversation_id: record.id, phase: phase.kind }, 'the work this conversation waits on is lost; recovering');
        if (await apply(record.id, { type: 'work_lost', reason: `lost while ${phase.kind}` })) moved.push(record.id);
      } catch (err) {
        logger.warn({ err, conversation_id: record.id }, 'recovery check failed');
      }
    }
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
