/**
 * Turns the effects of one transition into outbox rows: queue jobs, cancel signals and the
 * conversation's numbered notifications (protobuf JSON). Pure: the applier (apply/applier.ts)
 * writes the rows with the new state in one commit.
 */
import { create, equals, toJson, type JsonValue, type MessageInitShape } from '@bufbuild/protobuf';
import { isMcpToolName, mcpServerOf } from '@bedrock/contracts/mcp';
import type { McpServerSpec } from '@bedrock/contracts';
import {
  CancelSignalSchema,
  ContextUsageSchema,
  ConversationEventJobSchema,
  ConversationEventSchema,
  ConversationStateSchema,
  LlmRequestJobSchema,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_LLM_REQUESTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  StateKind,
  TimerKind,
  ToolExecJobSchema,
  llmRequestJobId,
  subAgentResultEventId,
  subAgentStartEventId,
  subAgentStopEventId,
  toolExecJobId,
  type ContextUsage,
} from '@bedrock/contracts';
import {
  contextTokens,
  WARNING_THRESHOLD,
  type ConversationContext,
  type ConversationState,
  type Effect,
  type Notification,
  type TimerPurpose,
} from '../core/index.ts';
import { errorKindToProto, messageToProto, modeToProto, stateToProto } from './proto.ts';
import type { MessageRow } from '../store/conversation-store.ts';
import { buildLlmRequestJob } from './llm-request.ts';
import { ownerRefOf } from './owner-ref.ts';
import type { ServerToolName, ThinkingSetting } from '../settings.ts';
import type { JobSchemaName, OutboxRow } from '../store/outbox-row.ts';
import type { ConversationWorkspace } from '../store/conversation-store.ts';

export interface OutboxInput {
  readonly record: {
    readonly id: string;
    readonly ownerId: string;
    readonly cwd: string;
    readonly model: string;
    readonly sandboxAvailable: boolean;
    readonly notifySeq: number;
    /** The conversation's last message sequence before this transition's messages. */
    readonly messageSeq: number;
    readonly parentId: string | null;
    readonly thinking: ThinkingSetting;
    readonly serverTools: readonly ServerToolName[];
    readonly workspace: ConversationWorkspace | null;
  };
  readonly context: ConversationContext;
  readonly previous: ConversationState;
  readonly next: ConversationState;
  readonly effects: readonly Effect[];
  /** Messages persisted by this transition, in effect order. */
  readonly persisted: readonly MessageRow[];
  /** max_tokens of a request whose effect asks for none (0): the service's default for the model. */
  readonly maxTokens: number;
  readonly traceContext: Record<string, string>;
  /** The title this transition gives the conversation (its first user message), announced after the messages. */
  readonly title?: string | null;
  /** Deployment secret of the owner reference sent as the provider's metadata.user_id; none: no id is sent. */
  readonly ownerRefSecret?: string;
  /** The owner's MCP servers, when this transition runs an MCP tool (its job names its server). */
  readonly mcpServers?: readonly McpServerSpec[];
}

type EventKind = MessageInitShape<typeof ConversationEventSchema>['kind'];

const TIMER_KINDS: Record<TimerPurpose, TimerKind> = {
  retry: TimerKind.RETRY,
  cancel_timeout: TimerKind.CANCEL_TIMEOUT,
  sub_agent_timeout: TimerKind.SUB_AGENT_TIMEOUT,
};

export function contextUsageOf(state: ConversationState, contextWindow: number): ContextUsage {
  const used = state.lastUsage ? contextTokens(state.lastUsage) : 0;
  return create(ContextUsageSchema, {
    usedTokens: BigInt(used),
    contextWindow: BigInt(contextWindow),
    warning: used >= contextWindow * WARNING_THRESHOLD,
  });
}

/** The outbox row of a conversation's durable notification number `sequence`. */
export function notificationRow(conversationId: string, sequence: number, kind: EventKind): OutboxRow {
  const event = create(ConversationEventSchema, { conversationId, sequence: BigInt(sequence), deltaIndex: 0, kind });
  return {
    effectId: `${conversationId}/n/${sequence}`,
    conversationId,
    kind: 'notification',
    payload: { sequence, kind: event.kind.case ?? '', message: toJson(ConversationEventSchema, event) },
  };
}

/** `title_changed`: watchers show the new title. */
export function titleChanged(title: string): EventKind {
  return { case: 'titleChanged', value: { title } };
}

export function effectsToOutbox(input: OutboxInput): { rows: OutboxRow[]; notifySeq: number } {
  const { record, context, effects } = input;
  const id = record.id;
  const rows: OutboxRow[] = [];
  let notifySeq = record.notifySeq;
  let persistedIndex = 0;

  const notify = (kind: EventKind) => {
    notifySeq += 1;
    rows.push(notificationRow(id, notifySeq, kind));
  };

  // Durable notifications come first so that jobs (and their live output) follow them.
  for (const effect of effects) {
    if (effect.type === 'persist_message') {
      const message = input.persisted[persistedIndex++];
      if (message) notify({ case: 'messagePersisted', value: { message: messageToProto(message) } });
    } else if (effect.type === 'notify') {
      const kind = notificationKind(effect.notification, input.next, context.contextWindow);
      if (kind) notify(kind);
    }
  }
  if (input.title) notify(titleChanged(input.title));
  const before = stateToProto(input.previous, context.policy);
  const after = stateToProto(input.next, context.policy);
  if (
    !equals(ConversationStateSchema, before, after) ||
    input.previous.mode !== input.next.mode ||
    input.previous.lastUsage !== input.next.lastUsage
  ) {
    notify({
      case: 'stateChanged',
      value: { state: after, mode: modeToProto(input.next.mode), contextUsage: contextUsageOf(input.next, context.contextWindow) },
    });
  }

  const job = (
    effectId: string,
    conversationId: string,
    queue: string,
    schema: JobSchemaName,
    jobId: string,
    message: JsonValue,
    delayMs = 0,
  ) => rows.push({ effectId, conversationId, kind: 'job', payload: { queue, schema, jobId, delayMs, message } });
  const eventJob = (
    effect: Effect,
    conversationId: string,
    jobId: string,
    event: Parameters<typeof create<typeof ConversationEventJobSchema>>[1],
    delayMs = 0,
  ) =>
    job(
      effect.id,
      conversationId,
      QUEUE_CONVERSATION_EVENTS,
      'ConversationEventJob',
      jobId,
      toJson(
        ConversationEventJobSchema,
        create(ConversationEventJobSchema, { ...event, eventId: jobId, conversationId, traceContext: input.traceContext }),
      ),
      delayMs,
    );
  const cancel = (effect: Effect, target: { case: 'llmRequestId' | 'toolUseId'; value: string }) =>
    rows.push({
      effectId: effect.id,
      conversationId: id,
      kind: 'cancel',
      payload: { message: toJson(CancelSignalSchema, create(CancelSignalSchema, { conversationId: id, target })) },
    });

  for (const effect of effects) {
    switch (effect.type) {
      case 'request_llm': {
        const request = buildLlmRequestJob(
          {
            id,
            cwd: record.cwd,
            model: record.model,
            isSubAgent: context.isSubAgent,
            sandboxAvailable: record.sandboxAvailable,
            initialMode: record.sandboxAvailable ? 'restricted' : 'unrestricted',
            thinking: record.thinking,
            serverTools: record.serverTools,
          },
          effect,
          {
            maxTokens: input.maxTokens,
            notifySequence: BigInt(notifySeq),
            // The history is every message committed so far, this transition's included.
            historyThrough: BigInt(record.messageSeq + input.persisted.length),
            traceContext: input.traceContext,
            ownerRef: ownerRefOf(record.ownerId, input.ownerRefSecret),
          },
        );
        job(effect.id, id, QUEUE_LLM_REQUESTS, 'LlmRequestJob', llmRequestJobId(effect.requestId), toJson(LlmRequestJobSchema, request));
        break;
      }
      case 'execute_tool': {
        // Restricted work goes only to runners with a working sandbox (docs/design.md, "Trust boundaries").
        const queue = effect.mode === 'restricted' ? QUEUE_TOOL_EXEC_RESTRICTED : QUEUE_TOOL_EXEC;
        const message = create(ToolExecJobSchema, {
          toolUseId: effect.toolUseId,
          conversationId: id,
          toolName: effect.name,
          inputJson: JSON.stringify(effect.input),
          cwd: record.cwd,
          mode: modeToProto(effect.mode),
          notifySequence: BigInt(notifySeq),
          traceContext: input.traceContext,
          // The owner's own uid and the workspace's directory: what the tool's view shows.
          ...(record.workspace
            ? { toolUid: record.workspace.toolUid, toolGid: record.workspace.toolUid, workspacePath: record.workspace.path }
            : {}),
          // An MCP tool's server, as resolved for the owner now (none: the runner answers "unknown").
          ...(isMcpToolName(effect.name) ? { mcpServer: input.mcpServers?.find((s) => s.name === mcpServerOf(effect.name)) } : {}),
        });
        job(effect.id, id, queue, 'ToolExecJob', toolExecJobId(id, effect.toolUseId), toJson(ToolExecJobSchema, message));
        break;
      }
      case 'schedule_timer':
        eventJob(
          effect,
          id,
          effect.timerId,
          { event: { case: 'timerFired', value: { timerId: effect.timerId, kind: TIMER_KINDS[effect.purpose] } } },
          effect.delayMs,
        );
        break;
      case 'cancel_timer':
        rows.push({
          effectId: effect.id,
          conversationId: id,
          kind: 'remove_job',
          payload: { queue: QUEUE_CONVERSATION_EVENTS, jobId: effect.timerId },
        });
        break;
      case 'spawn_sub_agent':
        eventJob(effect, effect.agentId, subAgentStartEventId(effect.agentId), {
          event: {
            case: 'subAgentStart',
            value: {
              parentId: id,
              task: effect.task,
              model: record.model,
              mode: modeToProto(effect.mode),
              cwd: record.cwd,
              ownerId: record.ownerId,
              spawnToolUseId: effect.spawnToolUseId,
              index: effect.index,
            },
          },
        });
        break;
      case 'stop_sub_agent':
        eventJob(effect, effect.agentId, subAgentStopEventId(effect.agentId), {
          event: { case: 'subAgentStop', value: { reason: effect.reason } },
        });
        break;
      case 'notify_parent':
        eventJob(effect, effect.parentId, subAgentResultEventId(id), {
          event: {
            case: 'subAgentResult',
            value: {
              subAgentId: id,
              success: effect.outcome.success,
              result: effect.outcome.result,
              ...(effect.outcome.errorKind ? { errorKind: errorKindToProto(effect.outcome.errorKind) } : {}),
            },
          },
        });
        break;
      case 'abort_llm':
        cancel(effect, { case: 'llmRequestId', value: effect.requestId });
        break;
      case 'kill_tool':
        cancel(effect, { case: 'toolUseId', value: effect.toolUseId });
        break;
      case 'persist_message':
      case 'notify':
        break;
    }
  }
  return { rows, notifySeq };
}

function notificationKind(n: Notification, state: ConversationState, contextWindow: number): EventKind | null {
  switch (n.kind) {
    case 'retry_scheduled':
      return {
        case: 'retryScheduled',
        value: {
          attempt: n.attempt,
          maxAttempts: n.maxAttempts,
          delayMs: BigInt(n.delayMs),
          errorKind: errorKindToProto(n.errorKind),
          errorMessage: n.message,
        },
      };
    case 'mode_upgrade_requested':
      return { case: 'modeUpgradeRequested', value: { toolUseId: n.toolUseId, reason: n.reason } };
    case 'mode_changed':
      return { case: 'modeChanged', value: { mode: modeToProto(n.mode), notice: n.notice } };
    case 'context_warning':
      return { case: 'contextWarning', value: { contextUsage: contextUsageOf(state, contextWindow) } };
    case 'context_exhausted':
      return { case: 'contextExhausted', value: { summary: n.summary } };
    case 'sub_agent_progress':
      return {
        case: 'subAgentProgress',
        value: {
          subAgentId: n.agentId,
          task: n.task,
          state: n.success ? StateKind.COMPLETED : StateKind.FAILED,
          success: n.success,
          result: n.result,
          finishedCount: n.finishedCount,
          totalCount: n.totalCount,
        },
      };
    case 'error':
      // The state_changed notification carries the error (message and kind).
      return null;
    case 'notice':
      return { case: 'notice', value: { text: n.text } };
  }
}
