/**
 * `bedrock acp` on a server with host paths off (web-bff's test system with workspace storage;
 * the test plays the gateway): session/new sends the editor's directory as a host path, and when
 * the server refuses it the session works in the user's default workspace instead; the first
 * prompt's answer starts with a note saying so (docs/cli.md, "What is mapped").
 */
import { PassThrough, Readable, Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import * as acp from '@agentclientprotocol/sdk';
import { StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { serveAcp } from '../src/acp/agent.ts';

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'acp_ws', workspaceStorage: true });
});
afterAll(async () => {
  await s?.close();
});

describe('bedrock acp where host paths are off', () => {
  it("works in the default workspace instead of the editor's directory, and says so", async () => {
    const toAgent = new PassThrough();
    const fromAgent = new PassThrough();
    let stderr = '';
    const served = serveAcp({
      env: { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
      output: { out: () => undefined, err: (t) => void (stderr += t) },
      input: toAgent,
      stdout: fromAgent,
    });
    const updates: acp.SessionNotification[] = [];
    const connection = acp
      .client({ name: 'acp-ws-test' })
      .onNotification(acp.methods.client.session.update, ({ params }) => void updates.push(params))
      .connect(
        acp.ndJsonStream(Writable.toWeb(toAgent) as WritableStream<Uint8Array>, Readable.toWeb(fromAgent) as ReadableStream<Uint8Array>),
      );
    const agent = connection.agent;
    await agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });

    const { sessionId } = await agent.request(acp.methods.agent.session.new, { cwd: '/home/alice/project', mcpServers: [] });
    const c = (await s.client(s.tokens.alice).getConversation({ conversationId: sessionId })).conversation!;
    expect(c.workspaceName).toBe('default');
    expect(c.cwd).toMatch(new RegExp(`^${s.storage!.root}/ws-[0-9a-z]{26}$`));
    expect(stderr).toContain(`/home/alice/project refused (host paths are off): session ${sessionId} works in the default workspace`);

    const answered = agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text: 'hello' }] });
    const job = await s.waitFor('the LLM request', () => s.llmJobs.find((j) => j.conversationId === sessionId));
    await s.send(sessionId, `r/${job.requestId}`, {
      case: 'llmResponse',
      value: { requestId: job.requestId, stopReason: StopReason.END_TURN, content: [{ block: { case: 'text', value: { text: 'Hi.' } } }] },
    });
    await expect(answered).resolves.toEqual({ stopReason: 'end_turn' });
    const said = updates
      .filter((u) => u.sessionId === sessionId && u.update.sessionUpdate === 'agent_message_chunk')
      .map((u) => (u.update.sessionUpdate === 'agent_message_chunk' && u.update.content.type === 'text' ? u.update.content.text : ''))
      .join('');
    expect(said).toBe(
      `Note: this server does not run tools in your editor's directory (/home/alice/project): host paths are off. This session works in your default workspace (default), ${c.cwd}, on the server.\n\nHi.`,
    );

    toAgent.end();
    await expect(served).resolves.toBe(0);
  }, 60_000);
});
