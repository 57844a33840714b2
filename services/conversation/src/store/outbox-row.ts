/**
 * An outbox row: one effect decided by a transition, written in the same commit, published
 * after it (outbox/publisher.ts, outbox/relay.ts). A tagged union on `kind`; rows read back
 * from Postgres are checked into it by `outboxRowFromDb`, never cast. In the table, the effects
 * one event decided for one conversation share ONE row of kind `effects` (`packOutboxRows`,
 * `outboxRowsFromDb`; why: docs/conversation.md, "Benchmark: applying events").
 */
import type { JsonValue } from '@bufbuild/protobuf';

/** The protobuf type of a job payload, so a publisher can decode it. */
export type JobSchemaName = 'LlmRequestJob' | 'ToolExecJob' | 'ConversationEventJob';

const JOB_SCHEMAS: readonly JobSchemaName[] = ['LlmRequestJob', 'ToolExecJob', 'ConversationEventJob'];

interface RowBase {
  /** Decided once per effect (the state machine's effect id, or the notification's position). */
  readonly effectId: string;
  /** Whose effect this is; rows of one conversation are published in order. */
  readonly conversationId: string;
}

export interface JobRow extends RowBase {
  readonly kind: 'job';
  readonly payload: {
    readonly queue: string;
    readonly schema: JobSchemaName;
    readonly jobId: string;
    readonly delayMs: number;
    readonly message: JsonValue;
  };
}
export interface RemoveJobRow extends RowBase {
  readonly kind: 'remove_job';
  readonly payload: { readonly queue: string; readonly jobId: string };
}
export interface CancelRow extends RowBase {
  readonly kind: 'cancel';
  readonly payload: { readonly message: JsonValue };
}
export interface NotificationRow extends RowBase {
  readonly kind: 'notification';
  /** `kind`: the event's oneof case (absent in rows written before it was stored). */
  readonly payload: { readonly sequence: number; readonly kind?: string; readonly message: JsonValue };
}

export type OutboxRow = JobRow | RemoveJobRow | CancelRow | NotificationRow;

/** A row as committed, with its outbox id (bigint, as text) and when it was written (ms since epoch). */
export interface StoredOutboxRow {
  readonly id: string;
  readonly createdAt: number;
  readonly row: OutboxRow;
}

export class MalformedOutboxRow extends Error {}

function field<T>(payload: Record<string, unknown>, name: string, check: (v: unknown) => v is T, where: string): T {
  const value = payload[name];
  if (!check(value)) throw new MalformedOutboxRow(`outbox row ${where}: payload.${name} is missing or of the wrong type`);
  return value;
}
const isString = (v: unknown): v is string => typeof v === 'string';
const isNumber = (v: unknown): v is number => typeof v === 'number' && Number.isFinite(v);
const isJson = (v: unknown): v is JsonValue => v !== undefined;
const isSchema = (v: unknown): v is JobSchemaName => JOB_SCHEMAS.includes(v as JobSchemaName);

/** Checks a row read from the `outbox` table into the union; throws MalformedOutboxRow. */
export function outboxRowFromDb(effectId: string, conversationId: string, kind: string, payload: unknown): OutboxRow {
  if (typeof payload !== 'object' || payload === null || Array.isArray(payload)) {
    throw new MalformedOutboxRow(`outbox row ${effectId}: payload is not an object`);
  }
  const p = payload as Record<string, unknown>;
  const base = { effectId, conversationId };
  switch (kind) {
    case 'job':
      return {
        ...base,
        kind,
        payload: {
          queue: field(p, 'queue', isString, effectId),
          schema: field(p, 'schema', isSchema, effectId),
          jobId: field(p, 'jobId', isString, effectId),
          delayMs: field(p, 'delayMs', isNumber, effectId),
          message: field(p, 'message', isJson, effectId),
        },
      };
    case 'remove_job':
      return { ...base, kind, payload: { queue: field(p, 'queue', isString, effectId), jobId: field(p, 'jobId', isString, effectId) } };
    case 'cancel':
      return { ...base, kind, payload: { message: field(p, 'message', isJson, effectId) } };
    case 'notification': {
      const sequence = field(p, 'sequence', isNumber, effectId);
      const message = field(p, 'message', isJson, effectId);
      return { ...base, kind, payload: typeof p.kind === 'string' && p.kind ? { sequence, kind: p.kind, message } : { sequence, message } };
    }
    default:
      throw new MalformedOutboxRow(`outbox row ${effectId}: unknown kind ${JSON.stringify(kind)}`);
  }
}

/**
 * The kind of a table row holding all the effects one event decided for one conversation, its
 * payload the list of the effects' rows: one index entry, one heap tuple and one mark per event
 * instead of one per effect. A single effect keeps a row of its own kind, and rows written one by
 * one (titles, checkpoints, a user action's transaction) are read as before.
 */
export const EFFECTS_KIND = 'effects';

/** A row of the `outbox` table as written: one effect, or the effects of one event for one conversation. */
export interface PackedOutboxRow {
  readonly effectId: string;
  readonly conversationId: string;
  readonly kind: string;
  readonly payload: unknown;
}

/**
 * The table rows for `rows` (the effects of one event), in order, and for each effect the index
 * of the table row that holds it. Rows of one conversation are packed into one, at the place of
 * its first; its effect id is the first effect's, marked (`…+N`, N more), so that it is unique
 * as the effects' own ids are.
 */
export function packOutboxRows(rows: readonly OutboxRow[]): { packed: PackedOutboxRow[]; holder: number[] } {
  const groups = new Map<string, OutboxRow[]>();
  for (const row of rows) {
    const group = groups.get(row.conversationId);
    if (group) group.push(row);
    else groups.set(row.conversationId, [row]);
  }
  const packed: PackedOutboxRow[] = [];
  const at = new Map<string, number>();
  for (const [conversationId, group] of groups) {
    at.set(conversationId, packed.length);
    const first = group[0]!;
    packed.push(
      group.length === 1
        ? first
        : {
            effectId: `${first.effectId}+${group.length - 1}`,
            conversationId,
            kind: EFFECTS_KIND,
            payload: group.map((r) => ({ effectId: r.effectId, kind: r.kind, payload: r.payload })),
          },
    );
  }
  return { packed, holder: rows.map((r) => at.get(r.conversationId)!) };
}

/** Checks a row read from the `outbox` table into the effects it holds (one, or an event's list); throws MalformedOutboxRow. */
export function outboxRowsFromDb(effectId: string, conversationId: string, kind: string, payload: unknown): OutboxRow[] {
  if (kind !== EFFECTS_KIND) return [outboxRowFromDb(effectId, conversationId, kind, payload)];
  if (!Array.isArray(payload) || payload.length === 0)
    throw new MalformedOutboxRow(`outbox row ${effectId}: payload is not a list of effects`);
  return payload.map((item: unknown, i) => {
    if (typeof item !== 'object' || item === null) throw new MalformedOutboxRow(`outbox row ${effectId}: effect ${i} is not an object`);
    const e = item as Record<string, unknown>;
    if (typeof e.effectId !== 'string' || typeof e.kind !== 'string' || e.kind === EFFECTS_KIND) {
      throw new MalformedOutboxRow(`outbox row ${effectId}: effect ${i} has no effect id or kind`);
    }
    return outboxRowFromDb(e.effectId, conversationId, e.kind, e.payload);
  });
}
