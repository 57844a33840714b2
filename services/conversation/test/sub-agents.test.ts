/**
 * Sub-agents (REQ-BED-008, 009, 018, 024): spawn_agents creates child conversations that run
 * in parallel — Restricted when the sandbox exists, without spawn_agents or
 * request_mode_upgrade — submit_result completes them, failures and timeouts reach the
 * parent, and the parent resumes once every child is accounted for.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import {
  ErrorKind,
  Mode,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  StateKind,
  StopReason,
  type ToolResultBlock,
} from '@bedrock/contracts';
import { text, textOf, toolResults, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
/** Sandbox unavailable, and a short sub-agent timeout. */
let hx: Harness;
beforeAll(async () => {
  [h, hx] = await Promise.all([
    startHarness({ label: 'subagents' }),
    startHarness({ label: 'subagents_nosandbox', config: { conversations: { sandbox: 'unavailable' }, turns: { subAgentTimeout: 300 } } }),
  ]);
});
afterAll(async () => {
  await Promise.all([h?.close(), hx?.close()]);
});

async function spawn(harness: Harness, tasks: string[], after: { id: string; name: string; input: object }[] = []) {
  const id = await harness.createConversation();
  await harness.client().sendMessage({ conversationId: id, text: 'split the work' });
  const job = await harness.llmJob(id);
  await harness.respond(job, {
    stopReason: StopReason.TOOL_USE,
    content: [
      text('Spawning.'),
      toolUse('sp', 'spawn_agents', { tasks: tasks.map((task) => ({ task })) }),
      ...after.map((t) => toolUse(t.id, t.name, t.input)),
    ],
  });
  return { id, children: tasks.map((_, i) => `${id}--sp--${i}`) };
}

function spawnResult(harness: Harness, parentId: string, index: number): ToolResultBlock {
  const job = harness.llmJobsOf(parentId)[index]!;
  const result = toolResults(job).find((r) => r.toolUseId === 'sp');
  if (!result) throw new Error('no spawn_agents result in the request');
  return result;
}

describe('with the sandbox available', () => {
  it('runs children in parallel in Restricted mode; results and failures reach the parent, which resumes when all are accounted for', async () => {
    const { id, children } = await spawn(h, ['find A', 'find B', 'find C'], [{ id: 'after', name: 'think', input: { thoughts: 'next' } }]);

    // All three run at once: each has its LLM request before any is answered.
    const first = await Promise.all(children.map((c) => h.llmJob(c)));
    const listed = await h.client().listConversations({ parentId: id });
    expect(listed.conversations.map((c) => c.id).sort()).toEqual([...children].sort());
    for (const c of listed.conversations) {
      expect(c.mode).toBe(Mode.RESTRICTED);
      expect(c.parentId).toBe(id);
      expect(c.userInitiated).toBe(false);
      expect(c.cwd).toBe('/tmp');
    }
    // Sub-agents are not listed among the user's conversations.
    expect((await h.client().listConversations({})).conversations.map((c) => c.id)).not.toContain(children[0]);
    first.forEach((job, i) => {
      expect(job.toolNames).toContain('submit_result');
      expect(job.toolNames).not.toContain('spawn_agents');
      expect(job.toolNames).not.toContain('request_mode_upgrade');
      expect(textOf(job.messages[0]!.content)).toBe(['find A', 'find B', 'find C'][i]);
      expect(job.systemPrompt).toMatch(/submit_result/);
    });
    const parentState = (await h.get(id)).conversation!.state!;
    expect(parentState.kind).toBe(StateKind.AWAITING_SUB_AGENTS);
    expect(parentState.subAgentCount).toBe(3);

    // Child 0 works in Restricted mode (the restricted queue), then submits.
    await h.respond(first[0]!, { stopReason: StopReason.TOOL_USE, content: [toolUse('b1', 'bash', { command: 'grep -r A .' })] });
    const bash = await h.toolJob(children[0]!, 'b1');
    expect(bash.mode).toBe(Mode.RESTRICTED);
    expect(bash.cwd).toBe('/tmp');
    expect(h.toolJobRecords.find((r) => r.job === bash)!.queue).toBe(QUEUE_TOOL_EXEC_RESTRICTED);
    await h.complete(bash, { content: 'a.txt: A' });
    const second = await h.llmJob(children[0]!, 1);
    await h.respond(second, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sr', 'submit_result', { result: 'A is in a.txt', success: true })],
    });
    await h.waitState(children[0]!, StateKind.COMPLETED);
    await h.waitFor('one accounted for', async () => (await h.get(id)).conversation!.state!.pendingSubAgentIds.length === 2);

    // Child 1 fails on a non-retryable error; child 2 ends its turn without submit_result.
    await h.fail(first[1]!, { kind: ErrorKind.AUTH, retryable: false, message: 'Authentication failed' });
    await h.respond(first[2]!, { content: [text('I looked around.')] });
    await h.waitState(children[1]!, StateKind.FAILED);
    await h.waitState(children[2]!, StateKind.FAILED);

    // The parent goes on with the next tool of the same response, then back to the model.
    await h.complete(await h.toolJob(id, 'after'), { content: 'noted' });
    await h.llmJob(id, 1);
    const result = spawnResult(h, id, 1);
    expect(result.isError).toBe(false);
    expect(result.content).toMatch(/3 spawned, 1 succeeded, 2 failed/);
    expect(result.content).toMatch(/A is in a\.txt/);
    expect(result.content).toMatch(/FAILED \(auth\)[\s\S]*Authentication failed/);
    expect(result.content).toMatch(/without calling submit_result: I looked around\./);
    for (const c of children) expect(result.content).toContain(c);

    const progress = (await h.notifications(id)).flatMap((e) => (e.kind.case === 'subAgentProgress' ? [e.kind.value] : []));
    expect(progress.map((p) => p.finishedCount)).toEqual([1, 2, 3]);
    expect(progress.every((p) => p.totalCount === 3)).toBe(true);
    expect(progress.find((p) => p.subAgentId === children[0])!.success).toBe(true);

    await h.respond(h.llmJobsOf(id)[1]!, { content: [text('Summary.')] });
    await h.waitState(id, StateKind.IDLE);
  });

  it('offers sub-agents no spawn or upgrade tool, and they cannot be driven by the user', async () => {
    const { id, children } = await spawn(h, ['only task']);
    const child = children[0]!;
    const job = await h.llmJob(child);
    await h.respond(job, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('x1', 'spawn_agents', { tasks: [{ task: 'nested' }] }), toolUse('x2', 'request_mode_upgrade', { reason: 'write' })],
    });
    const next = await h.llmJob(child, 1);
    const results = toolResults(next);
    expect(results.map((r) => [r.toolUseId, r.isError])).toEqual([
      ['x1', true],
      ['x2', true],
    ]);
    expect(results[0]!.content).toMatch(/Unknown tool: spawn_agents/);
    expect(results[1]!.content).toMatch(/Unknown tool: request_mode_upgrade/);
    expect((await h.client().listConversations({ parentId: child })).conversations).toHaveLength(0);

    const send = await rpcError(h.client().sendMessage({ conversationId: child, text: 'hi' }));
    expect(send.code).toBe(Code.FailedPrecondition);
    expect(send.rawMessage).toMatch(/driven by their parent/);
    const downgrade = await rpcError(h.client().downgradeMode({ conversationId: child }));
    expect(downgrade.code).toBe(Code.FailedPrecondition);

    // Submitting a failure: the only agent failed, so the spawn_agents result is an error.
    await h.respond(next, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('sr', 'submit_result', { result: 'could not', success: false })],
    });
    await h.waitState(child, StateKind.COMPLETED);
    await h.llmJob(id, 1);
    const result = spawnResult(h, id, 1);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/1 spawned, 0 succeeded, 1 failed/);
  });

  it('reports a sub-agent the user cancelled as a failure to its parent', async () => {
    const { id, children } = await spawn(h, ['one', 'two']);
    const jobs = await Promise.all(children.map((c) => h.llmJob(c)));
    expect((await h.client().cancel({ conversationId: children[0]! })).state!.kind).toBe(StateKind.FAILED);
    await h.waitFor('abort of the child request', () =>
      h.cancels.some((c) => c.target.case === 'llmRequestId' && c.target.value === jobs[0]!.requestId),
    );
    await h.respond(jobs[1]!, { stopReason: StopReason.TOOL_USE, content: [toolUse('sr', 'submit_result', { result: 'two done' })] });
    await h.llmJob(id, 1);
    const result = spawnResult(h, id, 1);
    expect(result.content).toMatch(/2 spawned, 1 succeeded, 1 failed/);
    expect(result.content).toMatch(/FAILED \(cancelled\)/);
  });
});

describe('with the sandbox unavailable and a short timeout', () => {
  it('spawns Unrestricted children; the timeout counts the silent one as failed and stops it', async () => {
    const { id, children } = await spawn(hx, ['slow task']);
    expect((await hx.get(id)).conversation!.mode).toBe(Mode.UNRESTRICTED);
    const child = children[0]!;
    const job = await hx.llmJob(child);
    expect(job.toolNames).toContain('submit_result');
    expect(job.toolNames).not.toContain('spawn_agents');
    expect(job.toolNames).not.toContain('request_mode_upgrade');

    // The child never answers: after 300 ms the parent resumes without it.
    const next = await hx.llmJob(id, 1);
    const result = spawnResult(hx, id, 1);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(/1 spawned, 0 succeeded, 1 failed/);
    expect(result.content).toMatch(/FAILED \(timeout\)/);
    expect(next.attempt).toBe(1);
    // The late child was stopped, and its own request aborted.
    await hx.waitState(child, StateKind.FAILED);
    const childConv = (await hx.get(child)).conversation!;
    expect(childConv.mode).toBe(Mode.UNRESTRICTED);
    expect(childConv.state!.errorKind).toBe(ErrorKind.CANCELLED);
    expect(childConv.state!.errorMessage).toMatch(/timed out/);
    await hx.waitFor('child abort', () => hx.cancels.some((c) => c.target.case === 'llmRequestId' && c.target.value === job.requestId));
    // Its late answer changes nothing for anyone.
    await hx.respond(job, { stopReason: StopReason.TOOL_USE, content: [toolUse('sr', 'submit_result', { result: 'late' })] });
    await hx.processed(`r/${job.requestId}`);
    expect((await hx.get(child)).conversation!.state!.kind).toBe(StateKind.FAILED);
    expect(hx.llmJobsOf(id)).toHaveLength(2);

    // The parent's own tools run Unrestricted, on the unrestricted queue.
    await hx.respond(next, { stopReason: StopReason.TOOL_USE, content: [toolUse('b1', 'bash', { command: 'true' })] });
    const bash = await hx.toolJob(id, 'b1');
    expect(bash.mode).toBe(Mode.UNRESTRICTED);
    expect(hx.toolJobRecords.find((r) => r.job === bash)!.queue).toBe(QUEUE_TOOL_EXEC);
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
  expect(hx.chainProblems()).toEqual([]);
});
