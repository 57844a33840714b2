/**
 * Builds the `llm-requests` job: a claim check naming the conversation and the last message
 * sequence of the request's history (`history_through`), not the history itself, so a job's
 * size does not grow with the conversation (docs/conversation.md, "LLM request jobs: claim
 * checks"). The gateway fetches the turns when it runs the job (ConversationHistoryService,
 * api/history-api.ts), built by {@link buildLlmMessages} from the committed messages up to there.
 */
import { create } from '@bufbuild/protobuf';
import { LlmMessageSchema, LlmRequestJobSchema, LlmRequestPurpose, Role, type LlmMessage, type LlmRequestJob } from '@bedrock/contracts';
import { buildContinuationPrompt, buildLlmHistory, type Effect, type HistoryMessage, type LlmTurn } from '../core/index.ts';
import { blockToProto } from '../mapping/proto.ts';
import { systemPrompt } from './system-prompt.ts';
import { serverToolToProto, thinkingToProto, type ServerToolName, type ThinkingSetting } from '../settings.ts';

export interface ConversationFacts {
  readonly id: string;
  readonly cwd: string;
  readonly model: string;
  readonly isSubAgent: boolean;
  readonly sandboxAvailable: boolean;
  /** Mode at creation; later changes reach the agent as system notices. */
  readonly initialMode: 'restricted' | 'unrestricted';
  /** The conversation's settings now: each request carries them (UpdateConversationSettings applies from the next one). */
  readonly thinking: ThinkingSetting;
  readonly serverTools: readonly ServerToolName[];
}

function turnToProto(turn: LlmTurn) {
  return create(LlmMessageSchema, {
    role: turn.role === 'user' ? Role.USER : Role.ASSISTANT,
    content: turn.content.map(blockToProto),
  });
}

type RequestLlm = Extract<Effect, { type: 'request_llm' }>;

/**
 * The Messages API turns of a history: today's chain rules (core/history.ts), and for a
 * continuation request (REQ-BED-020) its prompt appended to the last user turn, or as a new
 * user turn when the history ends with the assistant.
 */
export function buildLlmMessages(history: readonly HistoryMessage[], continuationPrompt = ''): LlmMessage[] {
  const turns = buildLlmHistory(history);
  if (continuationPrompt) {
    const prompt = { type: 'text' as const, text: continuationPrompt };
    const last = turns[turns.length - 1];
    if (last && last.role === 'user') last.content.push(prompt);
    else turns.push({ role: 'user', content: [prompt] });
  }
  return turns.map(turnToProto);
}

export interface LlmRequestJobOptions {
  /** The service's default, used when the effect asks for none (0). */
  readonly maxTokens: number;
  readonly notifySequence: bigint;
  /**
   * The last message sequence of the request's history: the conversation's message_seq once this
   * transition's messages are in (messages are append-only, so a re-published job names the same history).
   */
  readonly historyThrough: bigint;
  readonly traceContext?: Record<string, string>;
  /** The owner's opaque reference (owner-ref.ts), '' for none. */
  readonly ownerRef?: string;
}

export function buildLlmRequestJob(facts: ConversationFacts, effect: RequestLlm, options: LlmRequestJobOptions): LlmRequestJob {
  return create(LlmRequestJobSchema, {
    requestId: effect.requestId,
    conversationId: facts.id,
    model: facts.model,
    systemPrompt: systemPrompt(facts),
    toolNames: [...effect.toolNames],
    maxTokens: effect.maxTokens || options.maxTokens,
    purpose: effect.purpose === 'continuation' ? LlmRequestPurpose.CONTINUATION : LlmRequestPurpose.TURN,
    attempt: effect.attempt,
    notifySequence: options.notifySequence,
    traceContext: options.traceContext ?? {},
    // For a continuation summary too: the gateway decides what the model takes, and server
    // tools must be defined while their blocks are in the history.
    thinking: thinkingToProto(facts.thinking),
    serverTools: facts.serverTools.map(serverToolToProto),
    historyThrough: options.historyThrough,
    // REQ-BED-020: a tool-less request whose prompt names the tools that did not run.
    continuationPrompt: effect.purpose === 'continuation' ? buildContinuationPrompt(effect.rejectedToolCalls) : '',
    ownerRef: options.ownerRef ?? '',
  });
}
