/**
 * The web UI's API answered by the test, for ui-blocks.e2e: ScriptedApi routes a page's
 * ConversationService calls (ListConversations, WatchConversation batches, UpdateConversationSettings)
 * to scripted answers; serverBlock and text build the message blocks the scripted events carry.
 */
import type { Page } from 'playwright-core';
import { create, fromBinary, toBinary, type MessageInitShape } from '@bufbuild/protobuf';
import {
  ListConversationsResponseSchema,
  UpdateConversationSettingsRequestSchema,
  UpdateConversationSettingsResponseSchema,
  WatchConversationRequestSchema,
  WatchConversationResponseSchema,
  type ConversationEventSchema,
  type ConversationSchema,
  type MessageSchema,
  type UpdateConversationSettingsRequest,
} from '@bedrock/contracts';
import { envelope } from '@bedrock/testkit/raw-rpc';

export type MessageInit = Exclude<MessageInitShape<typeof MessageSchema>, { $typeName: string }>;
export type EventInit = MessageInitShape<typeof ConversationEventSchema>;

export const serverBlock = (json: Record<string, unknown>) => ({
  block: { case: 'serverTool' as const, value: { blockType: String(json.type), blockJson: JSON.stringify(json) } },
});
export const text = (t: string, citations?: unknown[]) => ({
  block: { case: 'text' as const, value: { text: t, citationsJson: citations ? JSON.stringify(citations) : '' } },
});

/**
 * The page's API answered by the test: ListConversations, WatchConversation (each call gets
 * the next batch of events pushed for its conversation, then the stream ends; a call with no
 * batch waits for one) and UpdateConversationSettings (as `settings` answers). Anything else is
 * UNIMPLEMENTED.
 */
export class ScriptedApi {
  private readonly batches = new Map<string, EventInit[][]>();
  private readonly waiting = new Set<() => void>();
  /** Requests the page gave up (it navigated away): a watch waiting for them takes nothing. */
  private readonly gone = new WeakSet<object>();
  readonly settingsCalls: UpdateConversationSettingsRequest[] = [];
  settings: (
    req: UpdateConversationSettingsRequest,
  ) => { conversation: MessageInitShape<typeof ConversationSchema> } | { code: string; message: string } = () => ({
    code: 'unimplemented',
    message: 'not scripted',
  });
  private closed = false;

  constructor(private readonly conversations: MessageInitShape<typeof ConversationSchema>[]) {}

  /** The events the next watch call of `id` gets (the current one, if it waits). */
  push(id: string, events: EventInit[]): void {
    const list = this.batches.get(id) ?? [];
    list.push(events);
    this.batches.set(id, list);
    this.wake();
  }

  private wake(): void {
    for (const resolve of this.waiting) resolve();
    this.waiting.clear();
  }

  async attach(p: Page): Promise<void> {
    p.on('requestfailed', (r) => {
      this.gone.add(r);
      this.wake();
    });
    await p.route('**/bedrock.v1.ConversationService/**', async (route) => {
      const method = new URL(route.request().url()).pathname.split('/').at(-1);
      const body = route.request().postDataBuffer() ?? Buffer.alloc(0);
      const proto = (bytes: Uint8Array, contentType = 'application/proto') =>
        route.fulfill({ status: 200, contentType, body: Buffer.from(bytes) });
      if (method === 'ListConversations')
        return proto(
          toBinary(ListConversationsResponseSchema, create(ListConversationsResponseSchema, { conversations: this.conversations })),
        );
      if (method === 'UpdateConversationSettings') {
        const req = fromBinary(UpdateConversationSettingsRequestSchema, body);
        this.settingsCalls.push(req);
        const answer = this.settings(req);
        if ('code' in answer) return route.fulfill({ status: 400, contentType: 'application/json', body: JSON.stringify(answer) });
        return proto(toBinary(UpdateConversationSettingsResponseSchema, create(UpdateConversationSettingsResponseSchema, answer)));
      }
      if (method === 'WatchConversation') {
        // A Connect stream: the request enveloped; the answer enveloped messages, then an end-of-stream frame.
        const id = fromBinary(WatchConversationRequestSchema, body.subarray(5)).conversationId;
        const request = route.request();
        let next = this.batches.get(id)?.shift();
        while (!next && !this.closed && !this.gone.has(request)) {
          await new Promise<void>((resolve) => this.waiting.add(resolve));
          if (!this.gone.has(request)) next = this.batches.get(id)?.shift();
        }
        if (!next) return route.abort().catch(() => undefined);
        const frames = next.map((e) =>
          envelope(
            toBinary(WatchConversationResponseSchema, create(WatchConversationResponseSchema, { event: { conversationId: id, ...e } })),
          ),
        );
        return route
          .fulfill({
            status: 200,
            contentType: 'application/connect+proto',
            body: Buffer.concat([...frames, envelope(Buffer.from('{}'), 2)]),
          })
          .catch(() => undefined);
      }
      return route.fulfill({
        status: 501,
        contentType: 'application/json',
        body: JSON.stringify({ code: 'unimplemented', message: `${method} is not scripted` }),
      });
    });
    // The settings panel lists the conversation's MCP servers: these conversations have none.
    await p.route('**/bedrock.v1.McpService/ListMcpServers', (route) =>
      route.fulfill({ status: 200, contentType: 'application/proto', body: Buffer.alloc(0) }),
    );
  }

  close(): void {
    this.closed = true;
    this.wake();
  }
}
