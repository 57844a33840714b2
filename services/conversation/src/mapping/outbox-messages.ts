/**
 * Outbox payloads (protobuf JSON, as stored) back to protobuf messages for publishing.
 */
import { fromJson, type DescMessage, type MessageShape } from '@bufbuild/protobuf';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationEventSchema,
  LlmRequestJobSchema,
  ToolExecJobSchema,
  type CancelSignal,
  type ConversationEvent,
} from '@bedrock/contracts';
import type { CancelRow, JobRow, JobSchemaName, NotificationRow } from '../store/outbox-row.ts';

export const JOB_SCHEMAS: Record<JobSchemaName, DescMessage> = {
  LlmRequestJob: LlmRequestJobSchema,
  ToolExecJob: ToolExecJobSchema,
  ConversationEventJob: ConversationEventJobSchema,
};

export function jobMessage(row: JobRow): MessageShape<DescMessage> {
  return fromJson(JOB_SCHEMAS[row.payload.schema], row.payload.message);
}

export function cancelMessage(row: CancelRow): CancelSignal {
  return fromJson(CancelSignalSchema, row.payload.message);
}

export function notificationMessage(row: NotificationRow): ConversationEvent {
  return fromJson(ConversationEventSchema, row.payload.message);
}
