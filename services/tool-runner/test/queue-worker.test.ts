/**
 * The runner on the queues, with the in-process transport and with the real Redis one
 * (unique key prefix): jobs in, results out under the deterministic event id, live output
 * on the notification stream, cancel over the cancel bus, capabilities in the registry.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { execSync } from 'node:child_process';
import { chownSync, existsSync, readFileSync } from 'node:fs';
import { create, toJsonString } from '@bufbuild/protobuf';
import {
  CancelSignalSchema,
  ConversationEventJobSchema,
  ConversationEventSchema,
  Mode,
  QUEUE_CONVERSATION_EVENTS,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  ToolCompleteEventSchema,
  ToolExecJobSchema,
  toolExecJobId,
  toolResultEventId,
  toolRunKey,
} from '@bedrock/contracts';
import type { ConversationEventJob, ToolCompleteEvent } from '@bedrock/contracts';
import { STREAM_START, createMemoryTransport, createRedisTransport } from '@bedrock/platform';
import type { Consumer, Transport } from '@bedrock/platform';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { groupGone, startTestRunner } from './support-runner.ts';
import { tempDir, testWorkspace } from './support.ts';

const REDIS_URL = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const ALIVE_MS = 1500;
const INTERRUPTED = 'The tool-runner stopped while this command was running (it may have partly run); it was not run again.';

function deleteRedisKeys(prefix: string): void {
  execSync(`redis-cli -u ${REDIS_URL} --scan --pattern '${prefix}:*' | xargs -r redis-cli -u ${REDIS_URL} del > /dev/null`);
}

describe.each([['memory'], ['redis']])('tool-runner on the %s transport', (kind) => {
  const prefix = `bedrock-test-tr-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const dir = tempDir('bedrock-queue-');
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

  function enqueue(
    queue: string,
    conversationId: string,
    toolUseId: string,
    command: string,
    mode: Mode,
    notifySequence = 0n,
    tenant: { toolUid?: number; toolGid?: number; workspacePath?: string; cwd?: string } = {},
  ) {
    const producer = transport.queues.producer(queue, ToolExecJobSchema);
    return producer.add(
      toolExecJobId(conversationId, toolUseId),
      create(ToolExecJobSchema, {
        toolUseId,
        conversationId,
        toolName: 'bash',
        inputJson: JSON.stringify({ command }),
        cwd: dir.path,
        mode,
        notifySequence,
        ...tenant,
      }),
    );
  }

  beforeAll(async () => {
    // A short liveness window (and job lock), so a runner that stops beating is seen dead quickly.
    transport =
      kind === 'memory'
        ? createMemoryTransport({ runs: { aliveTtlMs: ALIVE_MS } })
        : createRedisTransport({ redisUrl: REDIS_URL, prefix, onError: () => {}, lockDurationMs: ALIVE_MS });
    events = transport.queues.consume(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema, async (job) => {
      received.set(job.data.eventId, job.data);
      waiters.get(job.data.eventId)?.(job.data);
    });
    runner = await startTestRunner({ runner: { consume: true, concurrency: 4 } }, transport);
  });

  afterAll(async () => {
    await runner.stop();
    await events.close(0);
    await transport.close();
    if (kind === 'redis') deleteRedisKeys(prefix);
    dir.remove();
  });

  it('reports its capabilities to the registry, consuming the restricted queue too', async () => {
    const runners = await transport.runners.list();
    const me = runners.find((r) => r.runnerId === runner.capabilities().runnerId);
    expect(me).toMatchObject({ sandboxAvailable: true, queues: [QUEUE_TOOL_EXEC, QUEUE_TOOL_EXEC_RESTRICTED] });
  });

  it('runs a tool-exec job and sends the result as a conversation event with a deterministic id', async () => {
    await enqueue(QUEUE_TOOL_EXEC, 'conv-a', 'tu-1', 'echo hello', Mode.UNRESTRICTED);
    const result = await resultFor('conv-a', 'tu-1');
    expect(result).toMatchObject({ toolUseId: 'tu-1', content: 'hello\n', isError: false, exitCode: 0 });
    const event = received.get(toolResultEventId('conv-a', 'tu-1'));
    expect(event).toMatchObject({ eventId: toolResultEventId('conv-a', 'tu-1'), conversationId: 'conv-a' });
  });

  it('runs a tool-exec-restricted job under the sandbox', async () => {
    await enqueue(QUEUE_TOOL_EXEC_RESTRICTED, 'conv-b', 'tu-2', `echo x > ${dir.path}/f`, Mode.RESTRICTED);
    const result = await resultFor('conv-b', 'tu-2');
    expect(result.isError).toBe(true);
    expect(result.content).toContain('Permission denied');
  });

  it("runs a workspace job as its owner's uid in its view, and refuses a uid outside BEDROCK_TOOL_UIDS", async () => {
    const ws = testWorkspace();
    try {
      chownSync(ws.path, 200_201, 200_201);
      const tenant = { toolUid: 200_201, toolGid: 200_201, workspacePath: ws.path, cwd: ws.path };
      await enqueue(QUEUE_TOOL_EXEC, 'conv-t', 'tu-t1', 'id -u; ls /proc | grep -cE "^[0-9]+$"', Mode.UNRESTRICTED, 0n, tenant);
      const ran = await resultFor('conv-t', 'tu-t1');
      expect(ran.isError).toBe(false);
      const [uid, pids] = ran.content.trim().split('\n');
      expect(uid).toBe('200201');
      expect(Number(pids)).toBeLessThan(10);
      await enqueue(QUEUE_TOOL_EXEC, 'conv-t', 'tu-t2', 'id -u', Mode.UNRESTRICTED, 0n, { ...tenant, toolUid: 1000, toolGid: 1000 });
      const refused = await resultFor('conv-t', 'tu-t2');
      expect(refused.isError).toBe(true);
      expect(refused.content).toContain("outside this tool-runner's allowed tool users (BEDROCK_TOOL_UIDS 200000-299999)");
    } finally {
      ws.remove();
    }
  });

  it('appends live output to the notification stream after the job notify sequence', async () => {
    // The conversation's durable events 1..7 are in the stream, as the conversation service would have them.
    for (let sequence = 1n; sequence <= 7n; sequence++) {
      await transport.streams.appendDurable(
        create(ConversationEventSchema, { conversationId: 'conv-c', sequence, kind: { case: 'heartbeat', value: {} } }),
      );
    }
    await enqueue(QUEUE_TOOL_EXEC, 'conv-c', 'tu-3', 'echo one; sleep 0.2; echo two', Mode.UNRESTRICTED, 7n);
    await resultFor('conv-c', 'tu-3');
    const stream = await transport.streams.read('conv-c', STREAM_START, { limit: 100 });
    const outputs = stream.filter((e) => e.kind.case === 'toolOutput');
    expect(outputs.length).toBeGreaterThanOrEqual(2);
    expect(outputs.every((e) => e.sequence === 7n)).toBe(true);
    expect(outputs.map((e) => (e.kind.case === 'toolOutput' ? e.kind.value.text : '')).join('')).toBe('one\ntwo\n');
    expect(outputs[0]?.kind.value).toMatchObject({ toolUseId: 'tu-3' });
  });

  it('kills the tool process group on a cancel signal and reports cancelled', async () => {
    await enqueue(QUEUE_TOOL_EXEC, 'conv-d', 'tu-4', 'echo "pgid=$$"; sleep 60 & sleep 60', Mode.UNRESTRICTED);
    let pgid = 0;
    for (let i = 0; i < 200 && pgid === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      const stream = await transport.streams.read('conv-d', STREAM_START, { limit: 10 });
      const text = stream.map((e) => (e.kind.case === 'toolOutput' ? e.kind.value.text : '')).join('');
      pgid = Number(/pgid=(\d+)/.exec(text)?.[1] ?? 0);
    }
    expect(pgid).toBeGreaterThan(0);
    await transport.cancels.publish(create(CancelSignalSchema, { conversationId: 'conv-d', target: { case: 'toolUseId', value: 'tu-4' } }));
    const result = await resultFor('conv-d', 'tu-4');
    expect(result).toMatchObject({ cancelled: true, isError: true });
    expect(await groupGone(pgid)).toBe(true);
  });

  it('answers a job whose cancel came first as cancelled, without running it', async () => {
    await transport.cancels.publish(create(CancelSignalSchema, { conversationId: 'conv-e', target: { case: 'toolUseId', value: 'tu-5' } }));
    // Subscribers get the signal asynchronously (Redis pub/sub): give it a moment.
    await new Promise((resolve) => setTimeout(resolve, 100));
    await enqueue(QUEUE_TOOL_EXEC, 'conv-e', 'tu-5', `touch ${dir.path}/ran-tu-5`, Mode.UNRESTRICTED);
    const result = await resultFor('conv-e', 'tu-5');
    expect(result.cancelled).toBe(true);
    expect(existsSync(`${dir.path}/ran-tu-5`)).toBe(false);
  });

  it('does not run a redelivered tool call twice at the same time', async () => {
    const marker = `${dir.path}/count-tu-6`;
    // Two deliveries of the same tool_use_id under different job ids, as a redelivery would be.
    const producer = transport.queues.producer(QUEUE_TOOL_EXEC, ToolExecJobSchema);
    const data = create(ToolExecJobSchema, {
      toolUseId: 'tu-6',
      conversationId: 'conv-f',
      toolName: 'bash',
      inputJson: JSON.stringify({ command: `echo run >> ${marker}; sleep 0.5` }),
      cwd: dir.path,
      mode: Mode.UNRESTRICTED,
    });
    await producer.add('conv-f/tu-6', data);
    await producer.add('conv-f/tu-6/redelivery', data);
    await resultFor('conv-f', 'tu-6');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(readFileSync(marker, 'utf8')).toBe('run\n');
  });

  it('claims a tool call in the run ledger before running it and records its result', async () => {
    await enqueue(QUEUE_TOOL_EXEC, 'conv-g', 'tu-7', 'echo recorded', Mode.UNRESTRICTED);
    const result = await resultFor('conv-g', 'tu-7');
    // Recorded and sent at once: the record may land a moment after the result.
    let record = await transport.runs.get(toolRunKey('conv-g', 'tu-7'));
    for (let i = 0; i < 100 && record?.state !== 'finished'; i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      record = await transport.runs.get(toolRunKey('conv-g', 'tu-7'));
    }
    expect(record).toMatchObject({ state: 'finished', alive: false });
    expect(record!.owner.startsWith(`${runner.capabilities().runnerId}#`)).toBe(true);
    expect(JSON.parse(record!.result!)).toMatchObject({ toolUseId: 'tu-7', content: 'recorded\n' });
    expect(result.content).toBe('recorded\n');
  });

  it('answers a redelivered call with the result another runner recorded, without running it', async () => {
    const key = toolRunKey('conv-h', 'tu-8');
    expect(await transport.runs.claim(key, 'other-runner#1')).toBeNull();
    await transport.runs.finish(
      key,
      'other-runner#1',
      toJsonString(
        ToolCompleteEventSchema,
        create(ToolCompleteEventSchema, { toolUseId: 'tu-8', content: 'ran elsewhere', runnerId: 'other-runner' }),
      ),
    );
    await enqueue(QUEUE_TOOL_EXEC, 'conv-h', 'tu-8', `touch ${dir.path}/ran-tu-8`, Mode.UNRESTRICTED);
    expect(await resultFor('conv-h', 'tu-8')).toMatchObject({ content: 'ran elsewhere', runnerId: 'other-runner' });
    expect(existsSync(`${dir.path}/ran-tu-8`)).toBe(false);
  });

  it('waits for a call another live runner is running, and uses its result', async () => {
    const key = toolRunKey('conv-i', 'tu-9');
    expect(await transport.runs.claim(key, 'other-runner#2')).toBeNull();
    const beat = setInterval(() => void transport.runs.heartbeat(key, 'other-runner#2'), transport.runs.heartbeatMs);
    try {
      await enqueue(QUEUE_TOOL_EXEC, 'conv-i', 'tu-9', `touch ${dir.path}/ran-tu-9`, Mode.UNRESTRICTED);
      const result = resultFor('conv-i', 'tu-9');
      // Longer than the liveness window: the heartbeats keep the other runner's claim.
      await new Promise((resolve) => setTimeout(resolve, ALIVE_MS * 2));
      expect(received.has(toolResultEventId('conv-i', 'tu-9'))).toBe(false);
      await transport.runs.finish(
        key,
        'other-runner#2',
        toJsonString(ToolCompleteEventSchema, create(ToolCompleteEventSchema, { toolUseId: 'tu-9', content: 'finished over there' })),
      );
      expect(await result).toMatchObject({ content: 'finished over there' });
      expect(existsSync(`${dir.path}/ran-tu-9`)).toBe(false);
    } finally {
      clearInterval(beat);
    }
  });

  it('answers a call whose runner died mid-run as interrupted, and never runs it again', async () => {
    const key = toolRunKey('conv-j', 'tu-10');
    // Claimed, then no heartbeat: the runner that took it is gone.
    expect(await transport.runs.claim(key, 'dead-runner#3')).toBeNull();
    await enqueue(QUEUE_TOOL_EXEC, 'conv-j', 'tu-10', `touch ${dir.path}/ran-tu-10`, Mode.UNRESTRICTED);
    expect(await resultFor('conv-j', 'tu-10')).toMatchObject({ content: INTERRUPTED, isError: true, cancelled: false });
    expect(existsSync(`${dir.path}/ran-tu-10`)).toBe(false);
    // Recorded: a later delivery gets the same answer.
    expect(JSON.parse((await transport.runs.get(key))!.result!)).toMatchObject({ content: INTERRUPTED });
  });

  it('answers a call started by an earlier process of this runner as interrupted at once', async () => {
    const key = toolRunKey('conv-k', 'tu-11');
    expect(await transport.runs.claim(key, `${runner.capabilities().runnerId}#before-restart`)).toBeNull();
    const sent = Date.now();
    await enqueue(QUEUE_TOOL_EXEC, 'conv-k', 'tu-11', `touch ${dir.path}/ran-tu-11`, Mode.UNRESTRICTED);
    expect(await resultFor('conv-k', 'tu-11')).toMatchObject({ content: INTERRUPTED });
    // Its heartbeat had not lapsed yet: no waiting for it.
    expect(Date.now() - sent).toBeLessThan(ALIVE_MS);
    expect(existsSync(`${dir.path}/ran-tu-11`)).toBe(false);
  });
});

describe.each([['memory'], ['redis']])('tool-runner shutting down on the %s transport', (kind) => {
  const prefix = `bedrock-test-trs-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const dir = tempDir('bedrock-queue-stop-');
  let transport: Transport;
  let events: Consumer;
  const received = new Map<string, ToolCompleteEvent>();

  beforeAll(async () => {
    transport = kind === 'memory' ? createMemoryTransport() : createRedisTransport({ redisUrl: REDIS_URL, prefix, onError: () => {} });
    events = transport.queues.consume(QUEUE_CONVERSATION_EVENTS, ConversationEventJobSchema, async (job) => {
      if (job.data.event.case === 'toolComplete') received.set(job.data.eventId, job.data.event.value);
    });
  });

  afterAll(async () => {
    await events.close(0);
    await transport.close();
    if (kind === 'redis') deleteRedisKeys(prefix);
    dir.remove();
  });

  async function runWhileStopping(toolUseId: string, command: string, graceMs: number) {
    const runner = await startTestRunner({ runner: { consume: true, concurrency: 2 }, server: { shutdownGrace: graceMs } }, transport);
    const marker = `${dir.path}/${toolUseId}`;
    await transport.queues.producer(QUEUE_TOOL_EXEC, ToolExecJobSchema).add(
      `conv-s/${toolUseId}`,
      create(ToolExecJobSchema, {
        toolUseId,
        conversationId: 'conv-s',
        toolName: 'bash',
        inputJson: JSON.stringify({ command: `echo run >> ${marker}; ${command}` }),
        cwd: dir.path,
        mode: Mode.UNRESTRICTED,
      }),
    );
    for (let i = 0; i < 500 && !existsSync(marker); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    const stopping = Date.now();
    await runner.stop();
    const stopMs = Date.now() - stopping;
    const id = toolResultEventId('conv-s', toolUseId);
    for (let i = 0; i < 500 && !received.has(id); i++) await new Promise((resolve) => setTimeout(resolve, 10));
    return { result: received.get(id), stopMs, marker, job: await transport.queues.jobStatus(QUEUE_TOOL_EXEC, `conv-s/${toolUseId}`) };
  }

  it('lets a tool finish within the grace and sends its real result', async () => {
    const { result, marker, job } = await runWhileStopping('tu-fin', 'sleep 0.5; echo done', 5000);
    expect(result).toMatchObject({ content: 'done\n', isError: false });
    expect(readFileSync(marker, 'utf8')).toBe('run\n');
    expect(job.state).toBe('completed');
  });

  it('kills a tool still running after the grace and reports it interrupted, never handing it back to run again', async () => {
    const { result, stopMs, marker, job } = await runWhileStopping('tu-cut', 'sleep 60', 500);
    expect(result).toMatchObject({ content: INTERRUPTED, isError: true });
    expect(stopMs).toBeLessThan(5000);
    // Completed, not back in the queue: no other runner will run it again.
    expect(job.state).toBe('completed');
    expect(JSON.parse((await transport.runs.get(toolRunKey('conv-s', 'tu-cut')))!.result!)).toMatchObject({ content: INTERRUPTED });
    expect(readFileSync(marker, 'utf8')).toBe('run\n');
  });
});
