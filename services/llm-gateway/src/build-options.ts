/**
 * What buildMessagesRequest (build-request.ts) takes and reports: the job with its history
 * (LlmRequest), the build options and hooks, and the error for a job that cannot become a request.
 */
import type { LlmMessage, LlmRequestJob, McpToolDefinition } from '@bedrock/contracts';
import type { ModelRegistry } from '@bedrock/contracts/models';
import type { ImageCache, ImageLimits, RefusedImages } from './images.ts';
import type { CacheTtls } from './cache-breakpoints.ts';
import type { McpDeferLimits } from './mcp-defer.ts';

/** A job with the history it names, fetched from the conversation service: what is sent to the model. */
export type LlmRequest = LlmRequestJob & {
  readonly messages: readonly LlmMessage[];
  /** The conversation's MCP tools, defined after the built-in ones (docs/mcp.md). */
  readonly mcpTools?: readonly McpToolDefinition[];
};

export interface BuildOptions {
  readonly registry: ModelRegistry;
  /** Used when the job names no model. */
  readonly defaultModel: string;
  /** `max_tokens` when the job asks for 0 (the default), capped by the model's output limit. */
  readonly defaultMaxTokens: number;
  readonly imageLimits: ImageLimits;
  readonly imageCache?: ImageCache;
  /** Images the provider refused before: sent as a note instead (a conversation never sticks on one image). */
  readonly refusedImages?: RefusedImages;
  /** TTL of each prompt-caching breakpoint; default one hour everywhere (cache-breakpoints.ts). */
  readonly cacheTtls?: CacheTtls;
  /** When the MCP tools are deferred behind the tool search tool (mcp-defer.ts); default 30 tools or ~10k tokens. */
  readonly mcpDefer?: McpDeferLimits;
}

/** An image sent as a text note instead: one the gateway could not prepare, or the provider refused. */
export interface RemovedImage {
  /** e.g. "image 1 of message 3" (job messages), or "messages.2.content.1" (request indexes). */
  readonly label: string;
  readonly reason: string;
  /** `gateway`: it could not be prepared; `provider`: the provider refused it (now, or before). */
  readonly by: 'gateway' | 'provider';
}

export interface BuildHooks {
  /** Each image left out of the request, with the note in its place. */
  readonly onImageRemoved?: (removed: RemovedImage) => void;
  /**
   * The job asked for thinking but this request goes without it, and why; `firstInLoop` is true
   * for the first request of the tool loop it happens in (the one to tell the user about).
   */
  readonly onThinkingOmitted?: (reason: string, firstInLoop: boolean) => void;
  /** A text block's stored citations could not be read: the text is sent without them. */
  readonly onCitationsDropped?: (label: string) => void;
}

/** A job that cannot become a valid request; `message` is safe to show to the user. */
export class InvalidJobError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvalidJobError';
  }
}
