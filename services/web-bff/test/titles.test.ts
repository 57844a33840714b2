/**
 * Titles, search and sub-agents through web-bff's public API, in front of the real conversation
 * service: RenameConversation forwarded as the caller on every protocol (another user's
 * conversation is NOT_FOUND, a bad title INVALID_ARGUMENT with the service's sentence, no token
 * UNAUTHENTICATED), ListConversations' query, the title in the watch (snapshot and
 * title_changed), and a conversation's sub-agents in GetConversation and the watch snapshot.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { Code, ConnectError } from '@connectrpc/connect';
import { StopReason, type ConversationEvent } from '@bedrock/contracts';
import { startSystem, type Protocol, type System } from './support/system.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'titles' });
});
afterAll(async () => {
  await s?.close();
});

async function failure(call: Promise<unknown>): Promise<ConnectError> {
  try {
    await call;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

describe('RenameConversation through web-bff', () => {
  it.each<Protocol>(['connect', 'grpc', 'grpc-web', 'connect-h1'])('renames as the caller (%s)', async (protocol) => {
    const alice = s.client(s.tokens.alice, protocol);
    const id = (await alice.createConversation({ cwd: '/tmp' })).conversation!.id;
    const renamed = await alice.renameConversation({ conversationId: id, title: ` Plan the ${protocol} release ` });
    expect(renamed.conversation!.title).toBe(`Plan the ${protocol} release`);
    expect((await alice.getConversation({ conversationId: id })).conversation!.title).toBe(`Plan the ${protocol} release`);

    const bob = await failure(s.client(s.tokens.bob, protocol).renameConversation({ conversationId: id, title: 'mine now' }));
    expect([bob.code, bob.rawMessage]).toEqual([Code.NotFound, `conversation ${id} not found`]);
    const bad = await failure(alice.renameConversation({ conversationId: id, title: 'a\nb' }));
    expect([bad.code, bad.rawMessage]).toEqual([
      Code.InvalidArgument,
      'title contains a control character (U+000A at character 2): give one line of plain text, without line breaks or tabs',
    ]);
    const anonymous = await failure(s.client(undefined, protocol).renameConversation({ conversationId: id, title: 'x' }));
    expect(anonymous.code).toBe(Code.Unauthenticated);
    expect((await alice.getConversation({ conversationId: id })).conversation!.title).toBe(`Plan the ${protocol} release`);
  });
});

describe('titles in lists and watches', () => {
  it('the first message titles the conversation, watchers see it change, and search finds it', async () => {
    const alice = s.client(s.tokens.alice);
    const id = (await alice.createConversation({ cwd: '/tmp' })).conversation!.id;
    const abort = new AbortController();
    const events: ConversationEvent[] = [];
    const watching = (async () => {
      try {
        for await (const res of alice.watchConversation({ conversationId: id }, { signal: abort.signal })) events.push(res.event!);
      } catch {
        // aborted
      }
    })();
    await s.waitFor('the snapshot', () => events.length > 0);
    expect(events[0]!.kind.case).toBe('snapshot');

    await alice.sendMessage({ conversationId: id, text: 'Migrate the **billing** cron jobs' });
    await alice.renameConversation({ conversationId: id, title: 'Billing cron migration' });
    const titles = () => events.flatMap((e) => (e.kind.case === 'titleChanged' ? [e.kind.value.title] : []));
    await s.waitFor('both titles', () => titles().length === 2);
    expect(titles()).toEqual(['Migrate the billing cron jobs', 'Billing cron migration']);
    abort.abort();
    await watching;

    const found = await alice.listConversations({ query: 'CRON MIG' });
    expect(found.conversations.map((c) => [c.id, c.title])).toEqual([[id, 'Billing cron migration']]);
    expect((await s.client(s.tokens.bob).listConversations({ query: 'cron' })).conversations).toEqual([]);
  });

  it('a conversation’s details and snapshot list its sub-agents, which open as the owner only', async () => {
    const alice = s.client(s.tokens.alice);
    const id = (await alice.createConversation({ cwd: '/tmp' })).conversation!.id;
    await alice.sendMessage({ conversationId: id, text: 'split it' });
    const job = await s.waitFor('the LLM job', () => s.llmJobs.find((j) => j.conversationId === id));
    await s.send(id, `r/${job.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: job.requestId,
        stopReason: StopReason.TOOL_USE,
        content: [
          {
            block: {
              case: 'toolUse',
              value: { id: 'sp', name: 'spawn_agents', inputJson: JSON.stringify({ tasks: [{ task: 'Count the cron jobs' }] }) },
            },
          },
        ],
      },
    });
    const child = `${id}--sp--0`;
    const details = await s.waitFor('the sub-agent', async () => {
      const got = await alice.getConversation({ conversationId: id });
      return got.subAgents.length > 0 ? got : undefined;
    });
    expect(details.subAgents.map((a) => [a.id, a.title, a.parentId])).toEqual([[child, 'Count the cron jobs', id]]);
    const opened = await alice.getConversation({ conversationId: child });
    expect(opened.conversation).toMatchObject({ id: child, parentId: id, title: 'Count the cron jobs' });
    expect((await failure(s.client(s.tokens.bob).getConversation({ conversationId: child }))).code).toBe(Code.NotFound);

    for await (const res of alice.watchConversation({ conversationId: id })) {
      expect(res.event!.kind.case).toBe('snapshot');
      if (res.event!.kind.case === 'snapshot') expect(res.event!.kind.value.subAgents.map((a) => a.id)).toEqual([child]);
      break;
    }
    expect((await alice.listConversations({ pageSize: 200 })).conversations.map((c) => c.id)).not.toContain(child);
  });
});
