/**
 * An outbox row: one effect decided by a transition, written in the same commit, published
 * after it (outbox/publisher.ts, outbox/relay.ts). A tagged union on `kind`; rows read back
 * from Postgres are checked into it by `outboxRowFromDb`, never cast.
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
