/**
 * The one way an event changes a conversation, for the API, the event consumer and recovery: read
 * the row, run the transition, write state and effects in one statement if the revision still
 * holds (else again), publish; one event at a time per conversation (docs/conversation.md, "The store").
 */
import { isMcpToolName } from '@bedrock/contracts/mcp';
import type { McpServerSpec } from '@bedrock/contracts';
import { costOf, type ModelRegistry } from '@bedrock/contracts/models';
import type { Logger } from '@bedrock/platform/server';
import type { PoolClient } from 'pg';
import {
  initialState,
  makeContext,
  subtractUsage,
  transition,
  type ConversationContext,
  type ConversationEvent,
  type ConversationState,
  type Effect,
  type PhaseKind,
  type Policy,
  type Rejection,
} from '../core/index.ts';
import { effectsToOutbox, notificationRow, titleChanged } from '../mapping/effects-to-outbox.ts';
import { auditRowsOf } from '../mapping/audit-rows.ts';
import type { AuditActor } from '../store/audit-store.ts';
import { titleFromMessage } from '../titles.ts';
import { utcDay } from '../spend/periods.ts';
import { worstCaseCostMicros } from '../spend/estimate.ts';
import type { ReservationRequest } from '../spend/limits.ts';
import type { StoredOutboxRow } from '../store/outbox-row.ts';
import type { OutboxPublisher } from '../outbox/publisher.ts';
import type {
  AppliedWrite,
  ApplyRead,
  ConversationRecord,
  ConversationStore,
  MessageRow,
  NewConversation,
  Replayed,
  TokenCounts,
} from '../store/conversation-store.ts';
import { NO_TOKENS } from '../store/conversation-store.ts';
import { createKeyedChain } from '../keyed-chain.ts';
import { claimRequest, releaseRequest, storeOutcome, type RequestRecorder } from '../store/request-outcomes.ts';

/** What applying an event did; `from` is the phase the conversation was in (for metrics). */
export type ApplyResult =
  | {
      readonly kind: 'applied';
      readonly from: PhaseKind;
      readonly record: ConversationRecord;
      readonly effects: readonly Effect[];
      /** Messages this event persisted, with their ids and sequences. */
      readonly persisted: readonly MessageRow[];
    }
  | { readonly kind: 'noop'; readonly from: PhaseKind; readonly record: ConversationRecord }
  | { readonly kind: 'rejected'; readonly from: PhaseKind; readonly record: ConversationRecord; readonly rejection: Rejection }
  | { readonly kind: 'not_found' };

export interface ApplierOptions {
  readonly store: ConversationStore;
  readonly publisher: OutboxPublisher;
  readonly models: ModelRegistry;
  readonly policy?: Partial<Policy>;
  /** Output limit asked for each response, capped by the model's own limit. Default 16384 tokens. */
  readonly maxOutputTokens?: number;
  /** Secret of the owner reference sent as the provider's metadata.user_id (owner-ref.ts), once known; none: not sent. */
  readonly ownerRefSecret?: () => string | undefined;
  readonly logger: Logger;
  /** The clock that dates spend (the UTC day a response's cost counts on). Default: the system clock. */
  readonly now?: () => Date;
  /**
   * Holds an LLM request's worst-case cost from its owner's budget when something is left, and
   * answers what was left before (micro-dollars; null: no budget), when a transition would make
   * an LLM request (spend/limits.ts `reserve`). Absent: no budgets.
   */
  readonly reserve?: (request: ReservationRequest, at: Date, client?: PoolClient) => Promise<number | null>;
  /**
   * The service's default limits have no budget, so only an owner's own limits can give them
   * one: an LLM request of an owner not known to have one is then written with that checked in
   * the write (`onlyWithoutBudget`) instead of `reserve` reading their budget first, a round trip
   * less on most events that request the model. A write that misses this way is decided again
   * through `reserve`. Default false.
   */
  readonly budgetCheckedOnWrite?: boolean;
  /** The owner's MCP servers (mcp/registry.ts), read when a transition runs an MCP tool. Absent: none. */
  readonly mcpServers?: (ownerId: string, conversationId: string) => Promise<readonly McpServerSpec[]>;
  /**
   * Awaited before a transition that runs tools is written (checkpoints/checkpoints.ts: the
   * turn's checkpoint of the workspace is taken before its first tool). Never throws.
   */
  readonly beforeTools?: (record: ConversationRecord) => Promise<void>;
}

export interface Applier {
  /** `actor`: who asked, for a user action (its audit row names them and their client). */
  apply(id: string, event: ConversationEvent, traceContext?: Record<string, string>, actor?: AuditActor): Promise<ApplyResult>;
  /**
   * Applies a user action that carries a client request id: under the row lock the id is
   * claimed; if it was used before, nothing is applied and the stored outcome comes back
   * (`replayed`); otherwise the outcome is stored in the same commit as the event's writes.
   */
  applyRequest(
    id: string,
    event: ConversationEvent,
    traceContext: Record<string, string> | undefined,
    request: RequestRecorder<ApplyResult>,
    actor?: AuditActor,
  ): Promise<ApplyResult | Replayed>;
  /**
   * Sets the title its owner gave (already checked, titles.ts) and announces it to watchers
   * (`title_changed`), published in order with the conversation's other notifications. Not an
   * event of the state machine: the title is a column of the row, not part of its state. Null
   * when the conversation does not exist.
   */
  rename(id: string, title: string): Promise<ConversationRecord | null>;
  /** The context the transition runs with for this conversation. */
  contextFor(record: ConversationRecord): ConversationContext;
  /** A conversation to create: its context window from the model registry and the state machine's initial state. */
  newConversation(request: Omit<NewConversation, 'contextWindow' | 'state'>): NewConversation;
  /** Waits for publishing in progress. */
  drain(): Promise<void>;
}

/** Optimistic writes that lost to another replica in a row before giving up (the event is then redelivered). */
const MAX_CONFLICTS = 50;
/** Conversation rows kept in memory to apply without a read (the busy ones; a few KiB each). */
const KNOWN_ROWS = 1_000;
/** Owners remembered as having a budget of their own (their LLM requests reserve first); oldest forgotten first. */
const KNOWN_BUDGETED = 10_000;

type Decision =
  | { readonly kind: 'settled'; readonly result: ApplyResult }
  | { readonly kind: 'write'; readonly write: AppliedWrite; readonly result: Extract<ApplyResult, { kind: 'applied' }> };

export function createApplier(options: ApplierOptions): Applier {
  const { store, publisher, models } = options;
  const maxOutputTokens = options.maxOutputTokens ?? 16_384;
  const now = options.now ?? (() => new Date());
  /** Per conversation: the events being applied in this process, one after another. */
  const running = createKeyedChain();
  /**
   * The row as this process last read or wrote it, most recently used last. An event starts
   * from it without reading: if anything changed the row since (another replica, a settings
   * change), its revision moved, the write misses, and the event is read and decided again.
   */
  const known = new Map<string, ConversationRecord>();

  /**
   * Owners whose LLM requests go through `reserve` first: a write checked for "no budget"
   * (`budgetCheckedOnWrite`) missed for them, and `reserve` has not since found them without one.
   */
  const budgeted = new Set<string>();

  function rememberBudgeted(ownerId: string, has: boolean): void {
    budgeted.delete(ownerId);
    if (!has) return;
    budgeted.add(ownerId);
    if (budgeted.size > KNOWN_BUDGETED) budgeted.delete(budgeted.values().next().value!);
  }

  function remember(record: ConversationRecord): void {
    known.delete(record.id);
    known.set(record.id, record);
    if (known.size > KNOWN_ROWS) known.delete(known.keys().next().value!);
  }

  /** The usage the responses applied by this transition added to the total; null when none. */
  function usageAdded(record: ConversationRecord, next: ConversationState) {
    const before = record.state.totalUsage;
    const after = next.totalUsage;
    return after === before ? null : subtractUsage(after, before);
  }

  /** What the responses applied by this transition cost (at the model's prices) and the tokens they counted. */
  function spendOfTransition(record: ConversationRecord, next: ConversationState): { costMicros: number; tokens: TokenCounts } {
    const added = usageAdded(record, next);
    if (!added) return { costMicros: 0, tokens: NO_TOKENS };
    return {
      costMicros: costOf(added, models.lookup(record.model).prices),
      tokens: {
        input: added.inputTokens,
        output: added.outputTokens,
        cacheCreation: added.cacheCreationInputTokens,
        cacheRead: added.cacheReadInputTokens,
      },
    };
  }

  function contextFor(record: ConversationRecord, remainingBudgetMicros: number | null = null): ConversationContext {
    return makeContext({
      conversationId: record.id,
      cwd: record.cwd,
      model: record.model,
      contextWindow: record.contextWindow,
      maxOutputTokens: models.lookup(record.model).maxOutputTokens,
      isSubAgent: record.parentId !== null,
      parentId: record.parentId,
      sandboxAvailable: record.sandboxAvailable,
      ...(options.policy ? { policy: options.policy } : {}),
      remainingBudgetMicros,
    });
  }

  /** Steps 2: pure apart from the clock (messages' creation time). */
  /**
   * Step 2 with the owner's budget: decided first as if there were none; a transition that
   * would make an LLM request is decided again, with the budget left in its context, when the
   * owner's budget is spent (the core then stops the turn at this boundary instead). One read of
   * the spend per LLM request, none for other events.
   */
  async function decideWithBudget(
    record: ConversationRecord,
    event: ConversationEvent,
    traceContext: Record<string, string>,
    actor: AuditActor | undefined,
    /** The connection of the caller's transaction, when it holds one (the embedded mode's pool has one connection). */
    client?: PoolClient,
  ): Promise<Decision> {
    let first = decide(record, event, traceContext, actor, null);
    // A transition that runs an MCP tool is decided again with the owner's servers (its job
    // names the server): one read of them per MCP call, none for other events.
    let mcp: readonly McpServerSpec[] | undefined;
    if (
      options.mcpServers &&
      first.kind === 'write' &&
      first.result.effects.some((e) => e.type === 'execute_tool' && isMcpToolName(e.name))
    ) {
      mcp = await options.mcpServers(record.ownerId, record.id);
      first = decide(record, event, traceContext, actor, null, mcp);
    }
    if (options.beforeTools && first.kind === 'write' && first.result.effects.some((e) => e.type === 'execute_tool'))
      await options.beforeTools(record);
    if (!options.reserve || first.kind !== 'write') return first;
    const request = first.result.effects.find((e) => e.type === 'request_llm');
    if (!request) return first;
    // No default budget and none known for the owner: the write itself checks they have none.
    // Not in a caller's transaction (it holds the row lock, and a miss there cannot retry).
    if (options.budgetCheckedOnWrite && !client && !budgeted.has(record.ownerId))
      return { ...first, write: { ...first.write, onlyWithoutBudget: true } };
    // Held before the request is emitted (under the owner's lock, so replicas cannot both take the
    // last of a budget); released or settled by the write that leaves no request in flight.
    const model = models.lookup(record.model);
    const micros = worstCaseCostMicros(model.prices, {
      contextWindow: record.contextWindow,
      maxTokens: request.maxTokens || Math.min(maxOutputTokens, model.maxOutputTokens),
      serverTools: record.serverTools,
    });
    const remaining = await options.reserve(
      {
        userId: record.ownerId,
        conversationId: record.id,
        requestId: request.requestId,
        micros,
        pendingCostMicros: first.write.costMicros,
      },
      now(),
      client,
    );
    if (remaining === null) rememberBudgeted(record.ownerId, false);
    return remaining !== null && remaining <= 0 ? decide(record, event, traceContext, actor, remaining, mcp) : first;
  }

  function decide(
    record: ConversationRecord,
    event: ConversationEvent,
    traceContext: Record<string, string>,
    actor: AuditActor | undefined,
    remainingBudgetMicros: number | null,
    mcpServers?: readonly McpServerSpec[],
  ): Decision {
    const context = contextFor(record, remainingBudgetMicros);
    const result = transition(record.state, context, event);
    const from = record.state.phase.kind;
    if (!result.ok) return { kind: 'settled', result: { kind: 'rejected', from, record, rejection: result.rejection } };
    if (result.state === record.state) return { kind: 'settled', result: { kind: 'noop', from, record } };

    // Messages first: their sequence numbers and ids go into notifications and jobs.
    const createdAt = now();
    let messageSeq = record.messageSeq;
    const persisted: MessageRow[] = [];
    for (const effect of result.effects) {
      if (effect.type !== 'persist_message') continue;
      messageSeq += 1;
      const m = effect.message;
      persisted.push({
        id: `${record.id}/m/${messageSeq}`,
        conversationId: record.id,
        sequence: messageSeq,
        type: m.type,
        content: m.content,
        usage: m.usage ?? null,
        stopReason: m.stopReason ?? null,
        stopExplanation: m.stopExplanation ?? '',
        createdAt,
      });
    }
    // The first user message with words names a conversation that has no title yet (a rename
    // since the row was read bumped its revision: this write would miss and be decided again).
    const title = record.title === null ? autoTitle(persisted) : null;
    const ownerRefSecret = options.ownerRefSecret?.();
    const { rows, notifySeq } = effectsToOutbox({
      record,
      context,
      previous: record.state,
      next: result.state,
      effects: result.effects,
      persisted,
      maxTokens: Math.min(maxOutputTokens, models.lookup(record.model).maxOutputTokens),
      traceContext,
      title,
      ...(ownerRefSecret ? { ownerRefSecret } : {}),
      ...(mcpServers ? { mcpServers } : {}),
    });
    const phaseChanged = result.state.phase.kind !== record.state.phase.kind || result.state.mode !== record.state.mode;
    return {
      kind: 'write',
      write: {
        id: record.id,
        expectedRevision: record.revision,
        state: result.state,
        notifySeq,
        messageSeq,
        touchState: phaseChanged || result.effects.some((e) => e.type === 'request_llm' || e.type === 'execute_tool'),
        messages: persisted,
        outbox: rows,
        title,
        ...spendOfTransition(record, result.state),
        spendDay: utcDay(now()),
        releaseReservation: !llmRequestInFlight(result.state),
        audit: auditRowsOf({
          conversationId: record.id,
          ownerId: record.ownerId,
          previous: record.state,
          next: result.state,
          event,
          effects: result.effects,
          ...(actor ? { actor } : {}),
        }),
      },
      result: { kind: 'applied', from, record, effects: result.effects, persisted },
    };
  }

  /** Runs `work` after every earlier call for the same conversation in this process has finished. */
  function exclusive<T>(id: string, work: () => Promise<T>): Promise<T> {
    return running.run(id, () => work());
  }

  /** Step 4 starts inside the exclusive section (so batches of one conversation chain in commit order). */
  function publish(read: ApplyRead, write: Pick<AppliedWrite, 'id' | 'outbox'>, outboxIds: readonly string[]): Promise<void> {
    if (outboxIds.length !== write.outbox.length) {
      // Some rows were there already (cannot happen for a fresh version): let the relay publish what is unsent.
      options.logger.error(
        { conversation_id: write.id, written: outboxIds.length, decided: write.outbox.length },
        'outbox rows already existed',
      );
      return publisher.publishCommitted(write.id, ['unknown'], []);
    }
    // Not the injected clock: publish-rows.ts measures these rows' delays against Date.now().
    const createdAt = Date.now();
    const rows: StoredOutboxRow[] = write.outbox.map((row, i) => ({ id: outboxIds[i]!, createdAt, row }));
    return publisher.publishCommitted(write.id, read.unsentOutbox, rows);
  }

  return {
    contextFor,

    newConversation(request) {
      const { contextWindow } = models.lookup(request.model);
      const context = makeContext({
        conversationId: request.id,
        isSubAgent: Boolean(request.parentId),
        sandboxAvailable: request.sandboxAvailable,
        contextWindow,
      });
      return { ...request, contextWindow, state: initialState(context) };
    },

    async apply(id, event, traceContext = {}, actor) {
      const { result, published } = await exclusive(id, async () => {
        for (let attempt = 1; ; attempt++) {
          // First from the row as this process left it (one round trip); after a miss, read.
          const cached = attempt === 1 ? known.get(id) : undefined;
          const read = cached ? { record: cached, unsentOutbox: [] } : await store.readForApply(id);
          if (!read) {
            known.delete(id);
            return { result: { kind: 'not_found' } as ApplyResult, published: null };
          }
          if (!cached) remember(read.record);
          const decision = await decideWithBudget(read.record, event, traceContext, actor);
          // Settled from a remembered row that may be stale: decide again from a fresh read.
          if (decision.kind === 'settled' && cached) continue;
          if (decision.kind === 'settled') return { result: decision.result, published: null };
          const written = await store.writeApplied(read.record, decision.write);
          if (written) {
            remember(written.record);
            return {
              result: { ...decision.result, record: written.record } as ApplyResult,
              published: publish(read, decision.write, written.outboxIds),
            };
          }
          known.delete(id);
          // A miss of a write checked for "no budget" may be the owner's budget (or a stale
          // revision): decided again, their requests reserve first until one finds no budget.
          if (decision.write.onlyWithoutBudget) rememberBudgeted(read.record.ownerId, true);
          if (attempt >= MAX_CONFLICTS)
            throw new Error(`conversation ${id} kept changing under ${MAX_CONFLICTS} attempts to apply ${event.type}`);
        }
      });
      await published;
      return result;
    },

    async applyRequest(id, event, traceContext = {}, request, actor) {
      const { result, published } = await exclusive(id, async () => {
        let after: (() => Promise<void>) | null = null;
        const outcome = await store.withLocked(id, async (client, read): Promise<ApplyResult | Replayed> => {
          remember(read.record);
          const prior = await claimRequest(client, request.key);
          if (prior) return { kind: 'replayed', prior };
          const decision = await decideWithBudget(read.record, event, traceContext, actor, client);
          let result = decision.result;
          if (decision.kind === 'write') {
            const written = await store.writeApplied(read.record, decision.write, client);
            // Cannot happen: the row is locked since it was read.
            if (!written) throw new Error(`conversation ${id} changed under its row lock`);
            result = { ...decision.result, record: written.record };
            remember(written.record);
            after = () => publish(read, decision.write, written.outboxIds);
          }
          const stored = request.outcome(result);
          if (stored) await storeOutcome(client, request.key, stored);
          else await releaseRequest(client, request.key);
          return result;
        });
        // Committed: publish (still in order with this conversation's other events).
        const publishing = after ? (after as () => Promise<void>)() : null;
        return { result: outcome ?? ({ kind: 'not_found' } as const), published: publishing };
      });
      await published;
      return result;
    },

    async rename(id, title) {
      const { record, published } = await exclusive(id, async () => {
        let after: (() => Promise<void>) | null = null;
        const renamed = await store.withLocked(id, async (client, read) => {
          remember(read.record);
          // The same title again, already the owner's: nothing to change or announce.
          if (read.record.title === title && read.record.titleSource === 'user') return read.record;
          const notifySeq = read.record.notifySeq + 1;
          const outbox = [notificationRow(id, notifySeq, titleChanged(title))];
          const written = await store.writeTitle(client, read.record, { title, notifySeq, outbox });
          remember(written.record);
          after = () => publish(read, { id, outbox }, written.outboxIds);
          return written.record;
        });
        return { record: renamed, published: after ? (after as () => Promise<void>)() : null };
      });
      await published;
      return record;
    },

    drain: () => publisher.drain(),
  };
}

/**
 * Whether an LLM request of this state may still be answered with a cost: one in flight (not a
 * retry waiting for its timer) or one being aborted. Its budget reservation lives exactly as long.
 */
export function llmRequestInFlight(state: ConversationState): boolean {
  const phase = state.phase;
  switch (phase.kind) {
    case 'llm_requesting':
    case 'awaiting_continuation':
      return phase.retry === null;
    case 'cancelling':
      return true;
    default:
      return false;
  }
}

/** The automatic title from this transition's first user message with words; null if it persisted none. */
function autoTitle(persisted: readonly MessageRow[]): string | null {
  for (const message of persisted) {
    if (message.type !== 'user') continue;
    const text = message.content.flatMap((b) => (b.type === 'text' ? [b.text] : [])).join('\n');
    const title = titleFromMessage(text);
    if (title) return title;
  }
  return null;
}
