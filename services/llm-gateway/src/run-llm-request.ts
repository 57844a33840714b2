/**
 * One model call for one LlmRequestJob: build the request, stream it through the SDK
 * (maxRetries 0 — the state machine owns retries), pass text deltas on as they arrive, and
 * return either the complete response or a classified error. Never a partial response: an
 * abort, a cut stream or a mid-stream error all end as an LlmErrorEvent. An image the provider
 * refuses becomes a note and the request is sent again (docs/llm-gateway.md, "Images the provider refuses").
 */
import type { McpToolDefinition } from '@bedrock/contracts';
import { APIError } from '@anthropic-ai/sdk';
import type Anthropic from '@anthropic-ai/sdk';
import { create } from '@bufbuild/protobuf';
import {
  ContentBlockSchema,
  ErrorKind,
  LlmErrorEventSchema,
  LlmResponseEventSchema,
  UsageSchema,
  type ContentBlock,
  type LlmErrorEvent,
  type LlmMessage,
  type LlmRequestJob,
  type LlmResponseEvent,
  TokenDeltaKind,
} from '@bedrock/contracts';
import { compactionHeaders } from './compaction.ts';
import { buildMessagesRequest } from './build-request.ts';
import { InvalidJobError, type BuildOptions, type LlmRequest } from './build-options.ts';
import { countImages, replaceRefusedImages } from './request-images.ts';

export type { LlmRequest } from './build-options.ts';
import { base, classifyError, type Classified } from './classify-error.ts';
import { classifyHistoryError, type HistorySource } from './history-source.ts';
import { ImageRejectedError, parseImageRefusal, type ImageRefusal } from './images.ts';
import { StreamAccumulator, type AccumulatedBlock } from './stream-accumulator.ts';
import { lastByteAt } from './liveness-fetch.ts';
import { sentences } from './sentences.ts';

export type LlmOutcome =
  { readonly case: 'llmResponse'; readonly value: LlmResponseEvent } | { readonly case: 'llmError'; readonly value: LlmErrorEvent };

export interface RunOptions extends BuildOptions {
  /** Time allowed until the response headers arrive, ms. */
  readonly requestTimeoutMs: number;
  /** Longest silence allowed between stream events once streaming, ms (the API pings while it works). */
  readonly idleTimeoutMs: number;
}

export interface RunDeps {
  readonly client: Anthropic;
  readonly options: RunOptions;
  /** Aborts the HTTP stream at once (a cancel, or shutdown). */
  readonly signal?: AbortSignal;
  /**
   * Each text and thinking delta, in stream order; `blockIndex` is the block's index in the
   * response, `kind` TEXT for the answer and THINKING for the model's thinking.
   */
  readonly onDelta?: (blockIndex: number, text: string, kind: TokenDeltaKind) => void;
  /** Called once when the first stream event arrives (for latency metrics). */
  readonly onFirstEvent?: () => void;
  /** Non-fatal oddities worth a log line (dropped tool calls, unknown blocks, inferred stop reasons, thinking left out). */
  readonly onWarning?: (message: string, fields: Record<string, unknown>) => void;
}

const ABORTED_MESSAGE = 'The request was cancelled.';

function failure(requestId: string, c: Classified, aborted = false, partialText = ''): LlmOutcome {
  return {
    case: 'llmError',
    value: create(LlmErrorEventSchema, {
      requestId,
      kind: c.kind,
      retryable: c.retryable,
      message: c.message,
      retryAfterMs: BigInt(c.retryAfterMs),
      httpStatus: c.httpStatus,
      providerRequestId: c.providerRequestId,
      aborted,
      partialText: aborted ? partialText : '',
    }),
  };
}

/**
 * The answer text streamed so far (TEXT deltas; blocks a paragraph apart), which an abort
 * acknowledgement carries: the user saw it, and the conversation keeps it marked cancelled.
 */
class StreamedText {
  private readonly blocks = new Map<number, string>();
  add(blockIndex: number, text: string, kind: TokenDeltaKind): void {
    if (kind === TokenDeltaKind.TEXT) this.blocks.set(blockIndex, (this.blocks.get(blockIndex) ?? '') + text);
  }
  clear(): void {
    this.blocks.clear();
  }
  get text(): string {
    return [...this.blocks.entries()]
      .sort(([a], [b]) => a - b)
      .map(([, t]) => t)
      .filter((t) => t.trim())
      .join('\n\n');
  }
}

/**
 * Runs a queued job: fetches the history it names from `history` (the job is a claim check),
 * then {@link runLlmRequest}. A history that cannot be fetched ends as an LlmErrorEvent
 * (the conversation service unreachable: retryable NETWORK, so the state machine retries).
 */
export async function runLlmJob(
  job: LlmRequestJob,
  deps: RunDeps & { readonly history: HistorySource; readonly onHistoryError?: (err: unknown) => void },
): Promise<LlmOutcome> {
  const cancelled = () => failure(job.requestId, base(ErrorKind.CANCELLED, false, ABORTED_MESSAGE), true);
  if (deps.signal?.aborted) return cancelled();
  let messages: LlmMessage[];
  let mcpTools: McpToolDefinition[] = [];
  try {
    // The conversation's MCP tools (listed by a tool-runner) are read beside the history.
    [messages, mcpTools] = await Promise.all([
      deps.history.fetch(job, deps.signal),
      deps.history.mcpTools ? deps.history.mcpTools(job.conversationId, deps.signal) : Promise.resolve([]),
    ]);
  } catch (err) {
    if (deps.signal?.aborted) return cancelled();
    deps.onHistoryError?.(err);
    return failure(job.requestId, classifyHistoryError(err));
  }
  return runLlmRequest({ ...job, messages, mcpTools }, deps);
}

/**
 * One model call for a job whose history is at hand. An image the provider refuses (HTTP 400
 * invalid_request_error naming it, or about images without naming one) cannot brick the
 * conversation: it is replaced by a text note (every image, when none is named) and the request
 * is sent again, within the same job; the image is remembered so later turns send the note at once.
 */
export async function runLlmRequest(job: LlmRequest, deps: RunDeps): Promise<LlmOutcome> {
  const { client, options, signal } = deps;
  const fail = (c: Classified, aborted = false): LlmOutcome => failure(job.requestId, c, aborted);
  let providerRequestId = '';
  const streamed = new StreamedText();
  const cancelled = () => failure(job.requestId, base(ErrorKind.CANCELLED, false, ABORTED_MESSAGE, providerRequestId), true, streamed.text);
  const onDelta = (blockIndex: number, text: string, kind: TokenDeltaKind) => {
    streamed.add(blockIndex, text, kind);
    deps.onDelta?.(blockIndex, text, kind);
  };
  if (signal?.aborted) return cancelled();

  let params: Anthropic.MessageCreateParamsStreaming;
  // For the user, once per tool loop (not a log line per request).
  const notices: string[] = [];
  try {
    params = await buildMessagesRequest(job, options, {
      onImageRemoved: (r) =>
        deps.onWarning?.(
          r.by === 'provider' ? 'image the provider refused before: sent as a note' : 'image that cannot be sent: sent as a note',
          { image: r.label, reason: r.reason },
        ),
      onThinkingOmitted: (reason, firstInLoop) => {
        if (firstInLoop) notices.push(thinkingOmittedNotice(reason));
      },
      onCitationsDropped: (label) => deps.onWarning?.('stored citations could not be read: text sent without them', { block: label }),
    });
  } catch (err) {
    if (err instanceof ImageRejectedError || err instanceof InvalidJobError) {
      return fail(base(ErrorKind.INVALID_REQUEST, false, err.message));
    }
    return fail(classifyError(err));
  }
  if (signal?.aborted) return cancelled();

  // One controller for the HTTP request: a cancel and the idle timer both abort it.
  const controller = new AbortController();
  const onAbort = () => abortQuietly(controller);
  signal?.addEventListener('abort', onAbort, { once: true });
  let idleTimer: NodeJS.Timeout | undefined;
  let idleExpired = false;
  // The response being read: with a liveness fetch its raw bytes (pings too) count as life.
  let live: Response | undefined;
  const armIdle = (ms = options.idleTimeoutMs) => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      const bytesAt = live ? lastByteAt(live) : undefined;
      const quietMs = bytesAt === undefined ? Infinity : performance.now() - bytesAt;
      if (quietMs < options.idleTimeoutMs) {
        armIdle(Math.max(1, options.idleTimeoutMs - quietMs));
        return;
      }
      idleExpired = true;
      abortQuietly(controller);
    }, ms);
  };
  let accumulator = new StreamAccumulator(onDelta);
  let first = true;
  // Image refusals retried so far: the first replaces what the provider named (or every
  // image), a second one every image left; then the error goes to the state machine as is.
  let imageRetries = 0;
  try {
    for (;;) {
      try {
        const { data: stream, response } = await client.messages
          .create(params, {
            signal: controller.signal,
            timeout: options.requestTimeoutMs,
            maxRetries: 0,
            headers: compactionHeaders(params),
          })
          .withResponse();
        providerRequestId = response.headers.get('request-id') ?? '';
        live = response;
        armIdle();
        // The SDK ends the iteration quietly when the signal aborts it; checked below.
        for await (const event of stream) {
          if (first) {
            first = false;
            deps.onFirstEvent?.();
          }
          armIdle();
          accumulator.push(event as unknown as { type: string });
        }
        break;
      } catch (err) {
        if (signal?.aborted) return cancelled();
        if (idleExpired) return fail(idle(options.idleTimeoutMs, providerRequestId));
        const refusal = imageRetries < 2 ? imageRefusalOf(err, params) : undefined;
        if (refusal) {
          // A second refusal: whichever image it names, none is kept.
          const removed = replaceRefusedImages(params, imageRetries === 0 ? refusal : { reason: refusal.reason }, options.refusedImages);
          if (removed.length > 0) {
            imageRetries++;
            deps.onWarning?.('the model provider refused an image: replaced by a note, request sent again', {
              provider_request_id: err instanceof APIError ? (err.requestID ?? '') : '',
              images: removed.map((r) => r.label),
              reason: refusal.reason,
            });
            streamed.clear();
            accumulator = new StreamAccumulator(onDelta);
            continue;
          }
        }
        const c = classifyError(err);
        return fail(c.providerRequestId ? c : { ...c, providerRequestId });
      }
    }
  } finally {
    clearTimeout(idleTimer);
    signal?.removeEventListener('abort', onAbort);
  }
  if (signal?.aborted) return cancelled();
  if (idleExpired) return fail(idle(options.idleTimeoutMs, providerRequestId));

  const result = accumulator.finish();
  if (!result.ok) {
    const kind = result.reason === 'incomplete' ? ErrorKind.NETWORK : ErrorKind.SERVER;
    return fail(
      base(kind, true, sentences(`The model provider's response was unusable: ${result.detail}`, 'Retrying may help.'), providerRequestId),
    );
  }
  // The caller's logger carries request_id.
  const done = { provider_request_id: providerRequestId };
  if (result.cutToolNames.length > 0)
    deps.onWarning?.('dropped incomplete tool_use blocks', {
      ...done,
      count: result.cutToolNames.length,
      tools: result.cutToolNames,
      stop_reason: result.rawStopReason,
      max_tokens: params.max_tokens,
    });
  if (result.cutBlockTypes.length > 0)
    deps.onWarning?.('dropped incomplete blocks', { ...done, types: result.cutBlockTypes, stop_reason: result.rawStopReason });
  if (result.unknownBlockTypes.length > 0)
    deps.onWarning?.('ignored content blocks of unknown types', { ...done, types: result.unknownBlockTypes });
  if (result.stopReasonInferred) deps.onWarning?.('stop reason inferred from content', { ...done, stop_reason: result.rawStopReason });
  if (accumulator.skippedEvents > 0)
    deps.onWarning?.('skipped stream events with a missing or unknown index', { ...done, count: accumulator.skippedEvents });

  const u = result.usage;
  return {
    case: 'llmResponse',
    value: create(LlmResponseEventSchema, {
      requestId: job.requestId,
      content: result.content.map(toContentBlock),
      stopReason: result.stopReason,
      model: result.model || params.model,
      usage: create(UsageSchema, {
        inputTokens: BigInt(u.inputTokens),
        outputTokens: BigInt(u.outputTokens),
        cacheCreationInputTokens: BigInt(u.cacheCreationInputTokens),
        cacheCreation1hInputTokens: BigInt(Math.min(u.cacheCreation1hInputTokens, u.cacheCreationInputTokens)),
        compactionTokens: BigInt(u.compactionTokens),
        cacheReadInputTokens: BigInt(u.cacheReadInputTokens),
        thinkingTokens: BigInt(u.thinkingTokens),
        webSearchRequests: BigInt(u.webSearchRequests),
        webFetchRequests: BigInt(u.webFetchRequests),
      }),
      maxTokens: params.max_tokens,
      cutToolNames: result.cutToolNames,
      stopExplanation: result.stopExplanation,
      notices,
    }),
  };
}

/** What the user is told when thinking cannot be sent for the rest of a tool loop. */
export function thinkingOmittedNotice(reason: string): string {
  return `Thinking is off until your next message: ${reason}, and the API accepts thinking in a tool loop only when the loop's turns started with it.`;
}

function toContentBlock(b: AccumulatedBlock): ContentBlock {
  switch (b.type) {
    case 'text':
      return create(ContentBlockSchema, { block: { case: 'text', value: { text: b.text, citationsJson: b.citations ?? '' } } });
    case 'tool_use':
      return create(ContentBlockSchema, { block: { case: 'toolUse', value: { id: b.id, name: b.name, inputJson: b.inputJson } } });
    case 'thinking':
      return create(ContentBlockSchema, { block: { case: 'thinking', value: { thinking: b.thinking, signature: b.signature } } });
    case 'redacted_thinking':
      return create(ContentBlockSchema, { block: { case: 'redactedThinking', value: { data: b.data } } });
    case 'server_tool':
      return create(ContentBlockSchema, { block: { case: 'serverTool', value: { blockType: b.blockType, blockJson: b.json } } });
    case 'compaction':
      return create(ContentBlockSchema, { block: { case: 'compaction', value: { content: b.content, blockJson: b.json } } });
  }
}

/**
 * A 400 invalid_request_error about an image of this request (one it names, or any when it
 * names none), as the Messages API answers an image it cannot take. Undefined otherwise.
 */
function imageRefusalOf(err: unknown, params: Anthropic.MessageCreateParamsStreaming): ImageRefusal | undefined {
  if (!(err instanceof APIError) || err.status !== 400) return undefined;
  if (err.type !== null && err.type !== 'invalid_request_error') return undefined;
  if (countImages(params) === 0) return undefined;
  return parseImageRefusal(err.apiMessage ?? err.message);
}

function idle(ms: number, providerRequestId: string): Classified {
  return base(
    ErrorKind.NETWORK,
    true,
    `The model provider sent nothing for ${ms} ms; the stream was abandoned. Retrying may help.`,
    providerRequestId,
  );
}

/**
 * Aborts without capturing stack traces. Node's stream teardown reads the stack of every
 * abort error synchronously, and under a source-map hook (tsx, jest) the first such read maps
 * every frame of the stack: tens of milliseconds on the first cancel, which REQ-BED-005 asks
 * to be immediate. These errors are expected and never logged with their stacks.
 */
function abortQuietly(controller: AbortController): void {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    controller.abort();
  } finally {
    Error.stackTraceLimit = limit;
  }
}
