import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationService, McpService, SendMessageRequestSchema } from '@bedrock/contracts';
import { withRequestId } from './request-ids.ts';

const m = ConversationService.method;

describe('withRequestId', () => {
  it('gives a change that takes a request_id and came without one an id of its own, new each time', () => {
    const first = withRequestId(m.sendMessage, create(SendMessageRequestSchema, { conversationId: 'c', text: 'hi' }));
    const second = withRequestId(m.sendMessage, create(SendMessageRequestSchema, { conversationId: 'c', text: 'hi' }));
    expect(first).toMatchObject({ conversationId: 'c', text: 'hi', $typeName: 'bedrock.v1.SendMessageRequest' });
    expect(first.requestId).toMatch(/^bff-[0-9a-f-]{36}$/);
    expect(second.requestId).not.toBe(first.requestId);
    expect(withRequestId(m.createConversation, { cwd: '/tmp', requestId: '' }).requestId).toMatch(/^bff-/);
    expect(withRequestId(m.cancel, { conversationId: 'c' })).toHaveProperty('requestId', expect.stringMatching(/^bff-/));
  });

  it("keeps a client's own id, and leaves reads, idempotent changes and changes without the field as they are", () => {
    const own = { conversationId: 'c', text: 'hi', requestId: 'client-1' };
    expect(withRequestId(m.sendMessage, own)).toBe(own);
    const read = { conversationId: 'c' };
    expect(withRequestId(m.getConversation, read)).toBe(read);
    const rename = { conversationId: 'c', title: 't' };
    expect(withRequestId(m.renameConversation, rename)).toBe(rename);
    const add = { name: 'fs', command: 'true' };
    expect(withRequestId(McpService.method.addMcpServer, add)).toBe(add);
    const watch = { conversationId: 'c' };
    expect(withRequestId(m.watchConversation, watch)).toBe(watch);
  });
});
