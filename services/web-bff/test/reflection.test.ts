/**
 * What server reflection reveals, asked with a raw reflection client and no credentials: web-bff's
 * public ports list the public API (ConversationService, WorkspaceService, McpService, AdminService), health and reflection;
 * the conversation service's internal port lists only health and reflection, and answers
 * NOT_FOUND for the internal services' symbols and files (docs/security.md, boundary 2). The
 * tool-runner's port is checked in services/tool-runner/test/grpc-service.test.ts.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { rawReflection } from '@bedrock/testkit/raw-reflection';
import { startSystem, type System } from './support/system.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'reflection', playWorkers: false });
});
afterAll(async () => {
  await s?.close();
});

const OPEN = ['grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection', 'grpc.reflection.v1alpha.ServerReflection'];
const NOT_FOUND = 5;

describe('server reflection', () => {
  it("web-bff's public port lists the public API", async () => {
    for (const version of ['v1', 'v1alpha'] as const) {
      const { status, answers } = await rawReflection(
        s.bff.grpcUrl,
        [
          { case: 'listServices', value: '' },
          { case: 'fileContainingSymbol', value: 'bedrock.v1.ConversationService' },
        ],
        version,
      );
      expect(status).toBe(0);
      expect(answers[0]!.services).toEqual(
        [
          'bedrock.v1.AdminService',
          'bedrock.v1.ConversationService',
          'bedrock.v1.McpService',
          'bedrock.v1.CheckpointService',
          'bedrock.v1.WorkspaceService',
          ...OPEN,
        ].sort(),
      );
      expect(answers[1]!.files?.[0]).toBe('bedrock/v1/conversation_service.proto');
    }
  });

  it("the conversation service's internal port lists only health and reflection", async () => {
    for (const version of ['v1', 'v1alpha'] as const) {
      const { status, answers } = await rawReflection(
        s.conversation.grpcUrl,
        [
          { case: 'listServices', value: '' },
          { case: 'fileContainingSymbol', value: 'bedrock.internal.v1.IdentityService' },
          { case: 'fileContainingSymbol', value: 'bedrock.internal.v1.ConversationHistoryService.GetLlmHistory' },
          { case: 'fileContainingSymbol', value: 'bedrock.v1.AdminService' },
          { case: 'fileContainingSymbol', value: 'bedrock.v1.ConversationService' },
          { case: 'fileByFilename', value: 'bedrock/internal/v1/identity_service.proto' },
          { case: 'fileContainingSymbol', value: 'grpc.health.v1.Health' },
        ],
        version,
      );
      expect(status).toBe(0);
      expect(answers[0]!.services).toEqual(OPEN);
      expect(answers.slice(1, 6)).toEqual(Array(5).fill({ errorCode: NOT_FOUND }));
      expect(answers[6]!.files?.[0]).toBe('grpc/health/v1/health.proto');
    }
  });
});
