/**
 * MCP calls on the queues, as the conversation service sends them: the same guarantees as a
 * built-in tool's call — a redelivered call runs once, a call a dead runner had claimed is
 * answered interrupted and not run again, progress is streamed as live output, a cancel
 * signal stops the call.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { create } from '@bufbuild/protobuf';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  McpServerSpecSchema,
  Mode,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_TOOL_EXEC,
  ToolExecJobSchema,
  toolExecJobId,
  toolResultEventId,
  toolRunKey,
} from '@bedrock/contracts';
import type { ConversationEventJob, ToolCompleteEvent } from '@bedrock/contracts';
import { STREAM_START, createMemoryTransport } from '@bedrock/platform';
import type { Consumer, Transport } from '@bedrock/platform';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { startTestRunner } from './support-runner.ts';
import { tempDir } from './support.ts';

const repo = new URL('../../../', import.meta.url).pathname;
const fixture = create(McpServerSpecSchema, {
  name: 'fixture',
  command: 'node',
  args: [new URL('./fixtures/mcp-fixture-server.mjs', import.meta.url).pathname],
});
const everything = create(McpServerSpecSchema, {
  name: 'everything',
  command: 'node',
  args: [join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js')],
});

const dir = tempDir('bedrock-mcp-queue-');
let transport: Transport;
let runner: ToolRunner;
let events: Consumer;
const received = new Map<string, ConversationEventJob>();
const waiters = new Map<string, (e: ConversationEventJob) => void>();

function resultFor(conversationId: string, toolUseId: string): Promise<ToolCompleteEvent> {
  const id = toolResultEventId(conversationId, toolUseId);
  const known = received.get(id);
  const event = known ? Promise.resolve(known) : new Promise<ConversationEventJob>((resolve) => waiters.set(id, resolve));
  return event.then((e) => {
    if (e.event.case !== 'toolComplete') throw new Error(`unexpected event ${e.event.case}`);
    return e.event.value;
  });
}

const job = (conversationId: string, toolUseId: string, toolName: string, input: unknown, server = fixture) =>
  create(ToolExecJobSchema, {
    toolUseId,
    conversationId,
    toolName,
    inputJson: JSON.stringify(input),
    cwd: dir.path,
    mode: Mode.UNRESTRICTED,
    mcpServer: server,
  });

beforeAll(async () => {
  transport = createMemoryTransport({ runs: { aliveTtlMs: 1500 } });
  events = transport.queues.consume(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema, async (j) => {
    received.set(j.data.eventId, j.data);
    waiters.get(j.data.eventId)?.(j.data);
  });
  runner = await startTestRunner({ runner: { consume: true, concurrency: 4 } }, transport);
});

afterAll(async () => {
  await runner.stop();
  await events.close(0);
  await transport.close();
  dir.remove();
});

describe('MCP calls on the queues', () => {
  it('runs a redelivered call once', async () => {
    const marker = join(dir.path, 'marks-1');
    const producer = transport.queues.producer(QUEUE_TOOL_EXEC, ToolExecJobSchema);
    const data = job('mcp-a', 'tu-1', 'mcp__fixture__mark', { path: marker });
    await producer.add(toolExecJobId('mcp-a', 'tu-1'), data);
    await producer.add(`${toolExecJobId('mcp-a', 'tu-1')}/redelivery`, data);
    expect(await resultFor('mcp-a', 'tu-1')).toMatchObject({ content: 'marked', isError: false });
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(readFileSync(marker, 'utf8')).toBe('run\n');
  }, 60_000);

  it('answers a call a dead runner had claimed as interrupted, without running it', async () => {
    const marker = join(dir.path, 'marks-2');
    expect(await transport.runs.claim(toolRunKey('mcp-b', 'tu-2'), 'dead-runner#1')).toBeNull();
    const producer = transport.queues.producer(QUEUE_TOOL_EXEC, ToolExecJobSchema);
    await producer.add(toolExecJobId('mcp-b', 'tu-2'), job('mcp-b', 'tu-2', 'mcp__fixture__mark', { path: marker }));
    const result = await resultFor('mcp-b', 'tu-2');
    expect(result).toMatchObject({ isError: true, cancelled: false });
    expect(result.content).toContain('it was not run again');
    expect(existsSync(marker)).toBe(false);
  }, 60_000);

  it('streams progress as live output', async () => {
    const producer = transport.queues.producer(QUEUE_TOOL_EXEC, ToolExecJobSchema);
    const input = { duration: 1, steps: 4 };
    await producer.add(
      toolExecJobId('mcp-c', 'tu-3'),
      job('mcp-c', 'tu-3', 'mcp__everything__trigger-long-running-operation', input, everything),
    );
    expect((await resultFor('mcp-c', 'tu-3')).isError).toBe(false);
    const stream = await transport.streams.read('mcp-c', STREAM_START, { limit: 100 });
    const text = stream.map((e) => (e.kind.case === 'toolOutput' ? e.kind.value.text : '')).join('');
    expect(text).toContain('[progress 1/4');
  }, 60_000);

  it('stops a call on a cancel signal', async () => {
    const producer = transport.queues.producer(QUEUE_TOOL_EXEC, ToolExecJobSchema);
    const input = { duration: 60, steps: 60 };
    await producer.add(
      toolExecJobId('mcp-d', 'tu-4'),
      job('mcp-d', 'tu-4', 'mcp__everything__trigger-long-running-operation', input, everything),
    );
    await new Promise((resolve) => setTimeout(resolve, 2500));
    const started = Date.now();
    await transport.cancels.publish(create(CancelSignalSchema, { conversationId: 'mcp-d', target: { case: 'toolUseId', value: 'tu-4' } }));
    expect(await resultFor('mcp-d', 'tu-4')).toMatchObject({ cancelled: true, isError: true });
    expect(Date.now() - started).toBeLessThan(3000);
  }, 60_000);
});
