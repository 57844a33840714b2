/**
 * Every schema that crosses a service boundary: the public API (bedrock.v1), the internal
 * job, event and notification payloads (bedrock.internal.v1), the standard gRPC health and
 * reflection services, and the static tool registry.
 */
export * from './gen/bedrock/v1/types_pb.ts';
export * from './gen/bedrock/v1/events_pb.ts';
export * from './gen/bedrock/v1/conversation_service_pb.ts';
export * from './gen/bedrock/v1/admin_service_pb.ts';
export * from './gen/bedrock/v1/workspace_service_pb.ts';
export * from './gen/bedrock/v1/checkpoint_service_pb.ts';
export * from './gen/bedrock/internal/v1/jobs_pb.ts';
export * from './gen/bedrock/internal/v1/tool_runner_service_pb.ts';
export * from './gen/bedrock/internal/v1/workspace_storage_service_pb.ts';
export * from './gen/bedrock/internal/v1/history_service_pb.ts';
export * from './gen/bedrock/internal/v1/identity_service_pb.ts';
export * from './gen/bedrock/internal/v1/mcp_host_service_pb.ts';
export * from './gen/bedrock/v1/mcp_service_pb.ts';
export * as health from './gen/grpc/health/v1/health_pb.ts';
export * as reflection from './gen/grpc/reflection/v1/reflection_pb.ts';
export * from './tools.ts';
export * from './mcp.ts';
export * from './queues.ts';
export * from './headers.ts';
export * from './states.ts';
export * from './rejections.ts';
