/**
 * What a test scripts the local Messages API server to answer. Each request takes the
 * next scripted response from the queue; when the queue is empty the server's fallback
 * responder answers (by default the offline demo model).
 */

/** Token counts as the Messages API reports them. */
export interface ApiUsage {
  input_tokens: number;
  output_tokens: number;
  cache_creation_input_tokens: number;
  cache_read_input_tokens: number;
  /**
   * Of `output_tokens`, how many were thinking. Default: estimated from the thinking blocks
   * when the message has any, else left out.
   */
  output_tokens_details?: { thinking_tokens: number };
  /** Server tool calls made. Default: counted from the `server_tool_use` blocks when there are any, else left out. */
  server_tool_use?: { web_search_requests: number; web_fetch_requests: number };
  /** The cache creation split by TTL (the server's prompt cache fills it in). */
  cache_creation?: { ephemeral_5m_input_tokens: number; ephemeral_1h_input_tokens: number };
  /** Per sampling iteration, when the request was compacted: the `compaction` one, then the `message` one. */
  iterations?: Array<Record<string, unknown>>;
}

/** One content block of a scripted message. */
export type ScriptBlock =
  | {
      readonly type: 'text';
      readonly text: string;
      /** The block's citations, streamed as citations_delta events before its text (and in the JSON body). */
      readonly citations?: ReadonlyArray<Record<string, unknown>>;
    }
  | {
      readonly type: 'tool_use';
      /** Default: a fresh `toolu_...` id. */
      readonly id?: string;
      readonly name: string;
      readonly input: unknown;
      /**
       * Stream only the first `jsonChars` characters of the input JSON and never send this
       * block's content_block_stop, as happens when `max_tokens` cuts a tool call.
       */
      readonly partialJsonChars?: number;
    }
  | {
      /** Streamed as thinking_delta events then a signature_delta with the server's signature of the text. */
      readonly type: 'thinking';
      readonly thinking: string;
      /**
       * Default: the server's signature of `thinking` (HMAC, see signing.ts). `false`: no
       * signature_delta (the block still ends), i.e. a block without a signature. A string: sent
       * as the signature verbatim (e.g. an invalid one).
       */
      readonly signature?: false | string;
      /** Cut before its signature, as `max_tokens` does: no signature_delta and no content_block_stop. */
      readonly cut?: boolean;
    }
  /**
   * A server-side compaction block: content_block_start with the block's other fields (its
   * signature), one `compaction_delta` with the final `content` and `encrypted_content`, then
   * content_block_stop. The server adds one itself when a request crosses its compaction trigger.
   */
  | {
      readonly type: 'compaction';
      readonly content: string | null;
      readonly encrypted_content?: string | null;
      readonly signature?: string;
    }
  /** Its `data` (default: issued by the server) comes whole in content_block_start. */
  | { readonly type: 'redacted_thinking'; readonly data?: string }
  | {
      /** A server tool call (web search, web fetch): streamed like tool_use (input_json_delta events). */
      readonly type: 'server_tool_use';
      /** Default: a fresh `srvtoolu_...` id. */
      readonly id?: string;
      readonly name: string;
      readonly input: unknown;
      /** As for tool_use: only this much of the input JSON, and no content_block_stop. */
      readonly partialJsonChars?: number;
    }
  | {
      /** A server tool's result; content_block_start carries the whole block, as the API streams it. */
      readonly type: 'web_search_tool_result' | 'web_fetch_tool_result' | 'tool_search_tool_result';
      /** Default: the id of the last `server_tool_use` before it in this message. */
      readonly tool_use_id?: string;
      /** As the API sends it: web search, an array of `web_search_result` (or an error object); web fetch, a `web_fetch_result` object. */
      readonly content: unknown;
    }
  /** Any block, e.g. a block type the client does not know: its start object and raw deltas. */
  | { readonly type: 'raw'; readonly start: Record<string, unknown>; readonly deltas?: ReadonlyArray<Record<string, unknown>> };

/** How a stream goes wrong, counted in SSE events written before the fault. */
export type StreamFault =
  /** Destroy the TCP connection (the client sees a network error). */
  | { readonly type: 'cut'; readonly afterEvents: number }
  /** End the response cleanly: no further events, so no stop reason and no message_stop. */
  | { readonly type: 'end'; readonly afterEvents: number }
  /** Send an `error` event, as the API does when it overloads mid-stream, then end. */
  | { readonly type: 'error-event'; readonly afterEvents: number; readonly errorType: string; readonly message: string }
  /** Send an event whose data is not JSON, then continue. */
  | { readonly type: 'malformed'; readonly afterEvents: number }
  /** Stop sending but keep the connection open (until the client gives up or aborts). */
  | { readonly type: 'stall'; readonly afterEvents: number }
  /**
   * Send only `ping` events, every `everyMs`, for `forMs`, then go on: a response the model is
   * still working on. The SDK drops pings before its caller sees them.
   */
  | { readonly type: 'pings'; readonly afterEvents: number; readonly forMs: number; readonly everyMs: number };

export interface ScriptedMessage {
  readonly kind: 'message';
  readonly content: readonly ScriptBlock[];
  /**
   * Default `tool_use` when a complete tool_use block is present, else `end_turn`. `null`
   * sends a message_delta without a stop reason.
   */
  readonly stopReason?: string | null;
  /**
   * With `stopReason: 'refusal'`: the explanation the API gives, sent as
   * `stop_details: {type: 'refusal', category: null, explanation}` (null when left out).
   * `stop_details` is null for every other stop reason.
   */
  readonly stopExplanation?: string;
  /** Merged over counts estimated from the request and the content. */
  readonly usage?: Partial<ApiUsage>;
  /** Also report input and cache counts in message_delta (cumulative), as newer API versions do. */
  readonly usageInDelta?: boolean;
  /** Default: the requested model. */
  readonly model?: string;
  /** Wait before sending the response headers, ms. Default 0. */
  readonly delayMs?: number;
  /** Wait between SSE events, ms. Default 0. */
  readonly eventDelayMs?: number;
  /** Characters per text delta (and per input_json_delta). Default 12. */
  readonly chunkChars?: number;
  readonly fault?: StreamFault;
}

export interface ScriptedError {
  readonly kind: 'error';
  readonly status: number;
  /** The API's error type, e.g. `overloaded_error`, `rate_limit_error`. */
  readonly errorType: string;
  readonly message: string;
  /** The `retry-after` header, as sent (seconds, or an HTTP date). */
  readonly retryAfter?: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly delayMs?: number;
}

/** Network-level faults before any response. */
export type ScriptedFault =
  /** Destroy the connection without answering. */
  | { readonly kind: 'drop'; readonly delayMs?: number }
  /** Never answer (until the client aborts or times out). */
  | { readonly kind: 'hang' };

export type ScriptedResponse = ScriptedMessage | ScriptedError | ScriptedFault;

/** A request as the server received it. */
export interface ReceivedRequest {
  readonly method: string;
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  /** The parsed JSON body (null when it was not JSON). */
  readonly body: MessagesRequestBody | null;
  /** The request id the server answered with. */
  readonly requestId: string;
  readonly receivedAt: number;
}

/** The parts of a Messages API request body the server and the offline model read. */
export interface MessagesRequestBody {
  readonly model: string;
  readonly max_tokens: number;
  readonly stream?: boolean;
  readonly system?: string | ReadonlyArray<{ type: string; text?: string }>;
  readonly tools?: ReadonlyArray<{ name: string; type?: string; description?: string; input_schema?: unknown; [key: string]: unknown }>;
  readonly tool_choice?: { readonly type: string; readonly name?: string; readonly [key: string]: unknown };
  readonly thinking?: { readonly type: string; readonly budget_tokens?: number; readonly display?: string };
  readonly output_config?: { readonly effort?: string; readonly [key: string]: unknown };
  readonly messages: ReadonlyArray<{ role: 'user' | 'assistant'; content: string | ReadonlyArray<ApiContentBlock> }>;
  readonly [key: string]: unknown;
}

export interface ApiContentBlock {
  readonly type: string;
  readonly text?: string;
  readonly id?: string;
  readonly name?: string;
  readonly input?: unknown;
  readonly tool_use_id?: string;
  readonly content?: string | ReadonlyArray<{ type: string; text?: string }>;
  readonly is_error?: boolean;
  readonly source?: { type: string; media_type?: string; data?: string };
  readonly [key: string]: unknown;
}

/**
 * An image the server refuses the way the Messages API does: before any scripted response,
 * HTTP 400 `invalid_request_error` whose message names the image by its place in the request,
 * `messages.<i>.content.<j>.image.source.base64: <reason>` (inside a tool result:
 * `messages.<i>.content.<j>.content.<k>.image...`), or only `<reason>` when `named` is false.
 */
export interface ImageRefusalRule {
  /** Which images; gets each image of a request as sent (base64 data, media type). */
  readonly match: (image: { readonly mediaType: string; readonly data: string }) => boolean;
  /** Default `Could not process image`. Real ones: `image exceeds 5 MB maximum: 5316784 bytes > 5242880 bytes`. */
  readonly reason?: string;
  /** false: the message does not say which image (as some of the API's do). Default true. */
  readonly named?: boolean;
}

/** Computes the answer to a request when no scripted response is queued. */
export type Responder = (request: ReceivedRequest) => ScriptedResponse | Promise<ScriptedResponse>;
