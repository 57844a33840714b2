/**
 * Server-side compaction in the local Messages API server (beta `compact-2026-01-12`), as the provider
 * documents it: a request whose input crosses the trigger of its `compact_20260112` edit is answered with a
 * `compaction` block first, then the answer computed on the compacted context (docs/testing.md, "The model:
 * the local Messages API server"). The fake signs what it issues, so a block sent back modified or invented
 * is refused, as the real API refuses one whose content or signature does not match.
 */
import type { BlockSigner } from './signing.ts';
import type { MessagesRequestBody } from './script.ts';

export const COMPACTION_BETA = 'compact-2026-01-12';
export const COMPACT_EDIT_TYPE = 'compact_20260112';
/** Input tokens of the edit's trigger (`{type: 'input_tokens', value}`) when it names none. */
export const DEFAULT_COMPACTION_TRIGGER = 150_000;
/** The smallest trigger the API accepts. */
export const MIN_COMPACTION_TRIGGER = 50_000;

/**
 * Models that take compaction: the provider lists Claude Opus 4.7, Opus 4.6, Sonnet 4.6 and
 * Mythos Preview; `bedrock-offline` too, so the offline demo model exercises it.
 */
export function compactionModel(model: string): boolean {
  return (
    model === 'bedrock-offline' ||
    /^claude-(opus|sonnet)-4-6/.test(model) ||
    /^claude-opus-4-7/.test(model) ||
    model === 'claude-mythos-preview'
  );
}

/** The `anthropic-beta` header's values. */
export function betasOf(headers: Readonly<Record<string, string | string[] | undefined>>): string[] {
  const raw = headers['anthropic-beta'];
  const joined = Array.isArray(raw) ? raw.join(',') : (raw ?? '');
  return joined
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

export interface CompactEdit {
  readonly trigger: number;
  readonly pauseAfterCompaction: boolean;
  readonly instructions?: string;
}

/** The request's compact edit (validated before), or undefined. */
export function compactEditOf(body: MessagesRequestBody): CompactEdit | undefined {
  const cm = body.context_management as { edits?: Array<Record<string, unknown>> } | undefined;
  const edit = cm?.edits?.find((e) => e.type === COMPACT_EDIT_TYPE);
  if (!edit) return undefined;
  const trigger = (edit.trigger as { value?: number } | null | undefined)?.value ?? DEFAULT_COMPACTION_TRIGGER;
  return {
    trigger,
    pauseAfterCompaction: edit.pause_after_compaction === true,
    ...(typeof edit.instructions === 'string' ? { instructions: edit.instructions } : {}),
  };
}

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why `context_management` is refused, or undefined. */
export function contextManagementProblem(body: Json, betas: readonly string[]): string | undefined {
  if (body.context_management === undefined || body.context_management === null) return undefined;
  const cm = body.context_management;
  if (!isObject(cm)) return 'context_management: Input should be an object';
  if (cm.edits === undefined) return undefined;
  if (!Array.isArray(cm.edits)) return 'context_management.edits: Input should be a valid list';
  for (const [i, edit] of cm.edits.entries()) {
    if (!isObject(edit) || edit.type !== COMPACT_EDIT_TYPE) {
      return `context_management.edits.${i}: Input tag '${String(isObject(edit) ? edit.type : edit)}' found using 'type' is not supported by this server (only '${COMPACT_EDIT_TYPE}')`;
    }
    if (!betas.includes(COMPACTION_BETA))
      return `context_management.edits.${i}: '${COMPACT_EDIT_TYPE}' requires the beta header 'anthropic-beta: ${COMPACTION_BETA}'`;
    if (!compactionModel(String(body.model)))
      return `context_management.edits.${i}: compaction is not supported for the model ${String(body.model)}`;
    const trigger = edit.trigger;
    if (trigger !== undefined && trigger !== null) {
      if (!isObject(trigger) || trigger.type !== 'input_tokens')
        return `context_management.edits.${i}.trigger.type: Input should be 'input_tokens'`;
      if (typeof trigger.value !== 'number' || !Number.isInteger(trigger.value))
        return `context_management.edits.${i}.trigger.value: Input should be a valid integer`;
      if (trigger.value < MIN_COMPACTION_TRIGGER)
        return `context_management.edits.${i}.trigger.value: Input should be greater than or equal to ${MIN_COMPACTION_TRIGGER}`;
    }
    if (edit.pause_after_compaction !== undefined && typeof edit.pause_after_compaction !== 'boolean')
      return `context_management.edits.${i}.pause_after_compaction: Input should be a valid boolean`;
    if (edit.instructions !== undefined && edit.instructions !== null && typeof edit.instructions !== 'string')
      return `context_management.edits.${i}.instructions: Input should be a valid string`;
  }
  return undefined;
}

/** What the signature covers: exactly the block's content and encrypted content. */
const signed = (content: string | null, encrypted: string | null) => `compaction\0${content ?? '\0null'}\0${encrypted ?? '\0null'}`;

export interface IssuedCompaction {
  readonly content: string;
  readonly encrypted_content: string;
  readonly signature: string;
}

/**
 * A compaction block this server issues for a summary: streamed as content_block_start, one
 * `compaction_delta` carrying the final `content` and `encrypted_content`, content_block_stop. The
 * `signature` covers content and encrypted content; the encrypted content is itself signed data.
 */
export function issueCompaction(summary: string, signer: BlockSigner): IssuedCompaction {
  const encrypted = signer.redactedData();
  return { content: summary, encrypted_content: encrypted, signature: signer.signThinking(signed(summary, encrypted)) };
}

/** Why a `compaction` block of the history is refused, or undefined (`at` names it). */
export function compactionBlockProblem(
  block: Json,
  at: string,
  role: string,
  betas: readonly string[],
  signer: BlockSigner,
): string | undefined {
  if (!betas.includes(COMPACTION_BETA)) return `${at}: \`compaction\` blocks require the beta header 'anthropic-beta: ${COMPACTION_BETA}'`;
  if (role !== 'assistant') return `${at}: \`compaction\` blocks are only allowed in \`assistant\` messages`;
  const content = block.content ?? null;
  const encrypted = block.encrypted_content ?? null;
  if (content !== null && typeof content !== 'string') return `${at}.compaction.content: Input should be a valid string`;
  if (content === '') return `${at}.compaction.content: String should have at least 1 character`;
  if (encrypted !== null && (typeof encrypted !== 'string' || !signer.verifyRedacted(encrypted)))
    return `${at}: Invalid \`encrypted_content\` in \`compaction\` block`;
  // A failed compaction (null content) is a no-op the API accepts; a summary must be the one issued.
  if (content !== null && !signer.verifyThinking(signed(content, encrypted as string | null), block.signature))
    return `${at}: Invalid \`signature\` in \`compaction\` block: its content does not match what the API returned`;
  return undefined;
}

/** The fake's summary of the messages it compacts. */
export function fakeSummary(body: MessagesRequestBody, instructions?: string): string {
  let users = 0;
  let tools = 0;
  for (const m of body.messages) {
    const blocks = typeof m.content === 'string' ? [{ type: 'text' }] : m.content;
    if (m.role === 'user' && blocks.some((b) => b.type === 'text')) users++;
    tools += blocks.filter((b) => b.type === 'tool_use').length;
  }
  return (
    `Summary of the conversation so far (offline compaction): ${users} user turn(s), ${tools} tool call(s).` +
    (instructions ? ` Instructions followed: ${instructions.slice(0, 80)}` : '')
  );
}
