/**
 * One model call for one LlmRequestJob: build the request, stream it through the SDK
 * (maxRetries 0 — the state machine owns retries), pass text deltas on as they arrive, and
 * return either the complete response or a classified error. Never a partial response: an
 * abort, a cut stream or a mid-stream error all end as an LlmErrorEvent.
 */
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
  type LlmRequestJob,
  type LlmResponseEvent,
} from '@bedrock/contracts';
import { buildMessagesRequest, ImageRejectedError, InvalidJobError, type BuildOptions } from './build-request.ts';
import { base, classifyError, type Classified } from './classify-error.ts';
import { StreamAccumulator } from './stream-accumulator.ts';

export type LlmOutcome = { readonly case: 'llmResponse'; readonly value: LlmResponseEvent } | { readonly case: 'llmError'; readonly value: LlmErrorEvent };

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
  /** Each text delta, in stream order; `blockIndex` is the block's index in the response. */
  readonly onDelta?: (blockIndex: number, text: string) => void;
  /** Called once when the first stream event arrives (for latency metrics). */
  readonly onFirstEvent?: () => void;
  /** Non-fatal oddities worth a log line (dropped tool calls, unknown blocks, inferred stop reasons). */
  readonly onWarning?: (message: string, fields: Record<string, unknown>) => void;
}

const ABORTED_MESSAGE = 'The request was cancelled.';

export async function runLlmRequest(job: LlmRequestJob, deps: RunDeps): Promise<LlmOutcome> {
  const { client, options, signal } = deps;
  const fail = (c: Classified, aborted = false): LlmOutcome => ({
    case: 'llmError',
    value: create(LlmErrorEventSchema, {
      requestId: job.requestId,
      kind: c.kind,
      retryable: c.retryable,
      message: c.message,
      retryAfterMs: BigInt(c.retryAfterMs),
      httpStatus: c.httpStatus,
      providerRequestId: c.providerRequestId,
      aborted,
    }),
  });
  let providerRequestId = '';
  const cancelled = () => fail(base(ErrorKind.CANCELLED, false, ABORTED_MESSAGE, providerRequestId), true);
  if (signal?.aborted) return cancelled();

  let params: Anthropic.MessageCreateParamsStreaming;
  try {
    params = await buildMessagesRequest(job, options);
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
  const armIdle = () => {
    clearTimeout(idleTimer);
    idleTimer = setTimeout(() => {
      idleExpired = true;
      abortQuietly(controller);
    }, options.idleTimeoutMs);
  };
  const accumulator = new StreamAccumulator(deps.onDelta);
  try {
    const { data: stream, response } = await client.messages
      .create(params, { signal: controller.signal, timeout: options.requestTimeoutMs, maxRetries: 0 })
      .withResponse();
    providerRequestId = response.headers.get('request-id') ?? '';
    armIdle();
    let first = true;
    // The SDK ends the iteration quietly when the signal aborts it; checked below.
    for await (const event of stream) {
      if (first) {
        first = false;
        deps.onFirstEvent?.();
      }
      armIdle();
      accumulator.push(event as unknown as { type: string });
    }
  } catch (err) {
    if (signal?.aborted) return cancelled();
    if (idleExpired) return fail(idle(options.idleTimeoutMs, providerRequestId));
    const c = classifyError(err);
    return fail(c.providerRequestId ? c : { ...c, providerRequestId });
  } finally {
    clearTimeout(idleTimer);
    signal?.removeEventListener('abort', onAbort);
  }
  if (signal?.aborted) return cancelled();
  if (idleExpired) return fail(idle(options.idleTimeoutMs, providerRequestId));

  const result = accumulator.finish();
  if (!result.ok) {
    const kind = result.reason === 'incomplete' ? ErrorKind.NETWORK : ErrorKind.SERVER;
    return fail(base(kind, true, `The model provider's response was unusable: ${result.detail}. Retrying may help.`, providerRequestId));
  }
  const fields = { requestId: job.requestId, providerRequestId };
  if (result.droppedToolUses > 0) deps.onWarning?.('dropped incomplete tool_use blocks', { ...fields, count: result.droppedToolUses, stopReason: result.rawStopReason });
  if (result.unknownBlockTypes.length > 0) deps.onWarning?.('ignored content blocks of unknown types', { ...fields, types: result.unknownBlockTypes });
  if (result.stopReasonInferred) deps.onWarning?.('stop reason inferred from content', { ...fields, stopReason: result.rawStopReason });
  if (accumulator.skippedEvents > 0) deps.onWarning?.('skipped stream events with a missing or unknown index', { ...fields, count: accumulator.skippedEvents });

  const content: ContentBlock[] = result.content.map((b) =>
    b.type === 'text'
      ? create(ContentBlockSchema, { block: { case: 'text', value: { text: b.text } } })
      : create(ContentBlockSchema, { block: { case: 'toolUse', value: { id: b.id, name: b.name, inputJson: b.inputJson } } }),
  );
  return {
    case: 'llmResponse',
    value: create(LlmResponseEventSchema, {
      requestId: job.requestId,
      content,
      stopReason: result.stopReason,
      model: result.model || params.model,
      usage: create(UsageSchema, {
        inputTokens: BigInt(result.usage.inputTokens),
        outputTokens: BigInt(result.usage.outputTokens),
        cacheCreationInputTokens: BigInt(result.usage.cacheCreationInputTokens),
        cacheReadInputTokens: BigInt(result.usage.cacheReadInputTokens),
      }),
    }),
  };
}

function idle(ms: number, providerRequestId: string): Classified {
  return base(ErrorKind.NETWORK, true, `The model provider sent nothing for ${ms} ms; the stream was abandoned. Retrying may help.`, providerRequestId);
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
