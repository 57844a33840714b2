/**
 * Per-conversation model settings: the thinking level (default BEDROCK_DEFAULT_THINKING) and
 * the server tools (allowed by BEDROCK_SERVER_TOOLS), chosen at creation, changed with
 * UpdateConversationSettings from the next LLM request on, inherited by sub-agents, and
 * refused as INVALID_ARGUMENT — with nothing stored — when the deployment does not allow them.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { ServerTool, StateKind, StopReason, ThinkingLevel } from '@bedrock/contracts';
import { text, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
/** The shipped defaults: thinking high, no server tools allowed. */
let plain: Harness;
beforeAll(async () => {
  [h, plain] = await Promise.all([
    startHarness({ label: 'settings', config: { conversations: { serverTools: ['web_search'], defaultThinking: 'medium' } } }),
    startHarness({ label: 'settings_defaults' }),
  ]);
});
afterAll(async () => {
  await Promise.all([h?.close(), plain?.close()]);
});

async function row(harness: Harness, id: string) {
  const { rows } = await harness.pool.query('SELECT thinking, server_tools, updated_at, state, version FROM conversations WHERE id = $1', [
    id,
  ]);
  return rows[0];
}

describe('at creation', () => {
  it('takes the deployment default, or the level and the allowed server tools asked for; each request carries them', async () => {
    const c = h.client();
    const byDefault = (await c.createConversation({ cwd: '/tmp' })).conversation!;
    expect([byDefault.thinking, byDefault.serverTools]).toEqual([ThinkingLevel.MEDIUM, []]);
    const chosen = (
      await c.createConversation({ cwd: '/tmp', thinking: ThinkingLevel.LOW, serverTools: [ServerTool.WEB_SEARCH, ServerTool.WEB_SEARCH] })
    ).conversation!;
    expect([chosen.thinking, chosen.serverTools]).toEqual([ThinkingLevel.LOW, [ServerTool.WEB_SEARCH]]);
    expect(await row(h, chosen.id)).toMatchObject({ thinking: 'low', server_tools: ['web_search'] });
    expect((await c.getConversation({ conversationId: chosen.id })).conversation).toMatchObject({
      thinking: ThinkingLevel.LOW,
      serverTools: [ServerTool.WEB_SEARCH],
    });

    await c.sendMessage({ conversationId: byDefault.id, text: 'hi' });
    await c.sendMessage({ conversationId: chosen.id, text: 'hi' });
    const [a, b] = await Promise.all([h.llmJob(byDefault.id), h.llmJob(chosen.id)]);
    expect([a.thinking, a.serverTools]).toEqual([ThinkingLevel.MEDIUM, []]);
    expect([b.thinking, b.serverTools]).toEqual([ThinkingLevel.LOW, [ServerTool.WEB_SEARCH]]);
  });

  it('defaults to high thinking and refuses every server tool on a deployment that allows none, creating nothing', async () => {
    const c = plain.client();
    const conv = (await c.createConversation({ cwd: '/tmp' })).conversation!;
    expect([conv.thinking, conv.serverTools]).toEqual([ThinkingLevel.HIGH, []]);
    const err = await rpcError(c.createConversation({ cwd: '/tmp', serverTools: [ServerTool.WEB_SEARCH] }));
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toBe(
      'server_tools: web_search is not allowed on this deployment (BEDROCK_SERVER_TOOLS; none are allowed). Ask the operator to add it to BEDROCK_SERVER_TOOLS, or leave it out.',
    );
    expect((await c.listConversations({})).conversations.map((x) => x.id)).toEqual([conv.id]);
  });

  it('refuses a server tool the deployment does not allow, and values that are no level or tool', async () => {
    const c = h.client();
    const before = (await c.listConversations({})).conversations.length;
    const fetch = await rpcError(c.createConversation({ cwd: '/tmp', serverTools: [ServerTool.WEB_SEARCH, ServerTool.WEB_FETCH] }));
    expect([fetch.code, fetch.rawMessage]).toEqual([
      Code.InvalidArgument,
      'server_tools: web_fetch is not allowed on this deployment (BEDROCK_SERVER_TOOLS; it allows web_search). Ask the operator to add it to BEDROCK_SERVER_TOOLS, or leave it out.',
    ]);
    const unspecified = await rpcError(c.createConversation({ cwd: '/tmp', serverTools: [ServerTool.UNSPECIFIED] }));
    expect([unspecified.code, unspecified.rawMessage]).toEqual([
      Code.InvalidArgument,
      'server_tools: UNSPECIFIED is not a server tool; use WEB_SEARCH or WEB_FETCH.',
    ]);
    const level = await rpcError(c.createConversation({ cwd: '/tmp', thinking: 42 as ThinkingLevel }));
    expect([level.code, level.rawMessage]).toEqual([
      Code.InvalidArgument,
      'thinking: 42 is not a thinking level; use OFF, LOW, MEDIUM, HIGH or MAX.',
    ]);
    expect((await c.listConversations({})).conversations).toHaveLength(before);
  });
});

describe('UpdateConversationSettings', () => {
  it('applies from the next LLM request: a request already sent keeps what it had', async () => {
    const c = h.client();
    const id = (await c.createConversation({ cwd: '/tmp', thinking: ThinkingLevel.HIGH, serverTools: [ServerTool.WEB_SEARCH] }))
      .conversation!.id;
    await c.sendMessage({ conversationId: id, text: 'look around' });
    const first = await h.llmJob(id);
    expect([first.thinking, first.serverTools]).toEqual([ThinkingLevel.HIGH, [ServerTool.WEB_SEARCH]]);

    // Changed while the request is out.
    const res = await c.updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.OFF, serverTools: { tools: [] } });
    expect([res.conversation!.thinking, res.conversation!.serverTools]).toEqual([ThinkingLevel.OFF, []]);
    expect(res.conversation!.state!.kind).toBe(StateKind.LLM_REQUESTING);
    await h.respond(first, { stopReason: StopReason.TOOL_USE, content: [toolUse('t1', 'bash', { command: 'ls' })] });
    await h.complete(await h.toolJob(id, 't1'), { content: 'x' });
    const second = await h.llmJob(id, 1);
    expect([second.thinking, second.serverTools]).toEqual([ThinkingLevel.OFF, []]);

    // Only what is set changes: the level alone, then the tools alone.
    await c.updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.MAX });
    expect(await row(h, id)).toMatchObject({ thinking: 'max', server_tools: [] });
    await c.updateConversationSettings({ conversationId: id, serverTools: { tools: [ServerTool.WEB_SEARCH] } });
    expect(await row(h, id)).toMatchObject({ thinking: 'max', server_tools: ['web_search'] });
    await h.respond(second, { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);
    await c.sendMessage({ conversationId: id, text: 'again' });
    const third = await h.llmJob(id, 2);
    expect([third.thinking, third.serverTools]).toEqual([ThinkingLevel.MAX, [ServerTool.WEB_SEARCH]]);
    // Nothing set: nothing changes, the conversation is answered as it is.
    const same = await c.updateConversationSettings({ conversationId: id });
    expect([same.conversation!.thinking, same.conversation!.serverTools]).toEqual([ThinkingLevel.MAX, [ServerTool.WEB_SEARCH]]);
  });

  it('refuses settings the deployment does not allow with INVALID_ARGUMENT, and stores nothing (the level asked with it neither)', async () => {
    const c = h.client();
    const id = (await c.createConversation({ cwd: '/tmp', thinking: ThinkingLevel.LOW })).conversation!.id;
    const before = await row(h, id);
    const err = await rpcError(
      c.updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.HIGH, serverTools: { tools: [ServerTool.WEB_FETCH] } }),
    );
    expect(err.code).toBe(Code.InvalidArgument);
    expect(err.rawMessage).toMatch(
      /^server_tools: web_fetch is not allowed on this deployment \(BEDROCK_SERVER_TOOLS; it allows web_search\)\./,
    );
    const level = await rpcError(c.updateConversationSettings({ conversationId: id, thinking: 9 as ThinkingLevel }));
    expect(level.code).toBe(Code.InvalidArgument);
    expect(await row(h, id)).toEqual(before);
  });

  it('answers NOT_FOUND for an unknown conversation and for one of another user, changing nothing', async () => {
    const unknown = await rpcError(
      h.client().updateConversationSettings({ conversationId: '00000000-0000-0000-0000-000000000000', thinking: ThinkingLevel.OFF }),
    );
    expect([unknown.code, unknown.rawMessage]).toEqual([Code.NotFound, 'conversation 00000000-0000-0000-0000-000000000000 not found']);
    const id = (await h.client().createConversation({ cwd: '/tmp' })).conversation!.id;
    const before = await row(h, id);
    const other = await rpcError(h.client('mallory').updateConversationSettings({ conversationId: id, thinking: ThinkingLevel.OFF }));
    expect([other.code, other.rawMessage]).toEqual([Code.NotFound, `conversation ${id} not found`]);
    expect(await row(h, id)).toEqual(before);
  });
});

describe('sub-agents', () => {
  it("inherit the parent's thinking level and server tools", async () => {
    const c = h.client();
    const id = (await c.createConversation({ cwd: '/tmp', thinking: ThinkingLevel.LOW, serverTools: [ServerTool.WEB_SEARCH] }))
      .conversation!.id;
    await c.sendMessage({ conversationId: id, text: 'split it' });
    await h.respond(await h.llmJob(id), {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sp', 'spawn_agents', { tasks: [{ task: 'part one' }] })],
    });
    const child = `${id}--sp--0`;
    const job = await h.llmJob(child);
    expect([job.thinking, job.serverTools]).toEqual([ThinkingLevel.LOW, [ServerTool.WEB_SEARCH]]);
    expect((await c.getConversation({ conversationId: child })).conversation).toMatchObject({
      thinking: ThinkingLevel.LOW,
      serverTools: [ServerTool.WEB_SEARCH],
    });
  });
});
