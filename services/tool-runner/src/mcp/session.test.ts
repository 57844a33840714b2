/**
 * notificationsBeforeResponses: a server's progress notifications and its result read in one
 * chunk (one tick) all reach the call, the last progress too. Without it the SDK drops the
 * progress read together with the result (checked here, so the test can tell the difference).
 */
import { describe, expect, it } from '@jest/globals';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import { LATEST_PROTOCOL_VERSION, type JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { notificationsBeforeResponses } from './session.ts';

/** A server that answers a tools/call with 3 progress notifications and the result, all in one tick. */
function oneReadServer(): Transport {
  const transport: Transport = {
    async start() {},
    async close() {
      transport.onclose?.();
    },
    async send(message: JSONRPCMessage) {
      if (!('method' in message) || !('id' in message)) return;
      const reply = (result: Record<string, unknown>) => transport.onmessage?.({ jsonrpc: '2.0', id: message.id, result });
      if (message.method === 'initialize')
        return void setTimeout(() =>
          reply({ protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: { tools: {} }, serverInfo: { name: 'one-read', version: '1' } }),
        );
      if (message.method === 'tools/call') {
        const progressToken = (message.params as { _meta?: { progressToken?: number } })._meta?.progressToken;
        setTimeout(() => {
          for (let progress = 1; progress <= 3; progress++)
            transport.onmessage?.({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken, progress, total: 3 } });
          reply({ content: [{ type: 'text', text: 'done' }] });
        });
      }
    },
  };
  return transport;
}

async function progressSeen(ordered: boolean): Promise<number[]> {
  const transport = oneReadServer();
  const client = new Client({ name: 'test', version: '1' }, { capabilities: {} });
  client.onerror = () => {};
  await client.connect(transport);
  if (ordered) notificationsBeforeResponses(transport);
  const seen: number[] = [];
  const result = await client.callTool({ name: 'slow', arguments: {} }, undefined, { onprogress: (p) => seen.push(p.progress) });
  expect(result.content).toEqual([{ type: 'text', text: 'done' }]);
  await client.close();
  return seen;
}

describe('notificationsBeforeResponses', () => {
  it('delivers every progress read in the same tick as the result, the last one too', async () => {
    expect(await progressSeen(true)).toEqual([1, 2, 3]);
  });

  it('is needed: without it the SDK drops the progress read with the result', async () => {
    expect(await progressSeen(false)).not.toEqual([1, 2, 3]);
  });
});
