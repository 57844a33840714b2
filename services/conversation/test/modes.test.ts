/**
 * Modes (REQ-BED-014..018): upgrade only with the user's approval, downgrade at once, notices
 * for the agent after pending tool results, Restricted work only on the restricted queue, and
 * Restricted mode existing only when a tool-runner reports a working sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import {
  MessageType,
  Mode,
  PATCH_RESTRICTED_ERROR,
  QUEUE_TOOL_EXEC,
  QUEUE_TOOL_EXEC_RESTRICTED,
  Role,
  RunnerCapabilitiesSchema,
  StateKind,
  StopReason,
} from '@bedrock/contracts';
import { MODE_NOTICE_RESTRICTED, MODE_NOTICE_UNRESTRICTED, UPGRADE_APPROVED, UPGRADE_DENIED } from '../src/core/index.ts';
import { text, textOf, toolResults, toolUse, type LlmJob } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
/** BEDROCK_SANDBOX=auto: the runners' reports decide. */
let ha: Harness;
beforeAll(async () => {
  [h, ha] = await Promise.all([
    startHarness({ label: 'modes' }),
    startHarness({ label: 'modes_auto', config: { conversations: { sandbox: 'auto' } } }),
  ]);
});
afterAll(async () => {
  await Promise.all([h?.close(), ha?.close()]);
});

const queueOf = (harness: Harness, conversationId: string, toolUseId: string) =>
  harness.toolJobRecords.find((r) => r.job.conversationId === conversationId && r.job.toolUseId === toolUseId)!.queue;

/** The last user turn of a request: its block kinds and texts. */
function lastUserTurn(job: LlmJob) {
  const turn = job.messages[job.messages.length - 1]!;
  expect(turn.role).toBe(Role.USER);
  return turn.content.map((b) =>
    b.block.case === 'toolResult'
      ? `result:${b.block.value.toolUseId}`
      : b.block.case === 'text'
        ? `text:${b.block.value.text}`
        : b.block.case,
  );
}

/** A conversation waiting for approval of `request_mode_upgrade` (u1), with `after` calls behind it. */
async function awaitingApproval(after: { id: string; name: string; input: object }[]) {
  const id = await h.createConversation();
  await h.client().sendMessage({ conversationId: id, text: 'fix the bug' });
  const job = await h.llmJob(id);
  await h.respond(job, {
    stopReason: StopReason.TOOL_USE,
    content: [
      text('I need to write.'),
      toolUse('u1', 'request_mode_upgrade', { reason: 'edit src/a.ts' }),
      ...after.map((t) => toolUse(t.id, t.name, t.input)),
    ],
  });
  await h.waitState(id, StateKind.AWAITING_MODE_APPROVAL);
  return id;
}

describe('upgrade', () => {
  it('waits for approval, then runs the rest of the turn Unrestricted and tells the agent after the tool results', async () => {
    const id = await awaitingApproval([
      { id: 'p1', name: 'patch', input: { path: '/tmp/a.ts', patches: [{ operation: 'overwrite', content: 'x' }] } },
    ]);
    const state = (await h.get(id)).conversation!.state!;
    expect(state.upgradeReason).toBe('edit src/a.ts');
    expect(state.currentToolUseId).toBe('u1');
    const asked = (await h.notifications(id)).flatMap((e) => (e.kind.case === 'modeUpgradeRequested' ? [e.kind.value] : []));
    expect(asked.map((a) => [a.toolUseId, a.reason])).toEqual([['u1', 'edit src/a.ts']]);
    expect(h.toolJobsOf(id)).toHaveLength(0);

    const res = await h.client().respondToModeUpgrade({ conversationId: id, approve: true });
    expect(res.conversation!.mode).toBe(Mode.UNRESTRICTED);
    expect(res.conversation!.state!.kind).toBe(StateKind.TOOL_EXECUTING);
    const patch = await h.toolJob(id, 'p1');
    expect(patch.mode).toBe(Mode.UNRESTRICTED);
    expect(queueOf(h, id, 'p1')).toBe(QUEUE_TOOL_EXEC);
    const changed = (await h.notifications(id)).flatMap((e) => (e.kind.case === 'modeChanged' ? [e.kind.value] : []));
    expect(changed.map((c) => [c.mode, c.notice])).toEqual([[Mode.UNRESTRICTED, MODE_NOTICE_UNRESTRICTED]]);

    await h.complete(patch, { content: 'patched', displayJson: JSON.stringify({ diff: '+x' }) });
    const next = await h.llmJob(id, 1);
    expect(lastUserTurn(next)).toEqual(['result:u1', 'result:p1', `text:[System notice] ${MODE_NOTICE_UNRESTRICTED}`]);
    expect(toolResults(next).map((r) => [r.content, r.isError])).toEqual([
      [UPGRADE_APPROVED, false],
      ['patched', false],
    ]);
    const { messages } = await h.get(id);
    expect(messages.map((m) => MessageType[m.type])).toEqual(['USER', 'AGENT', 'TOOL', 'SYSTEM', 'TOOL']);
    expect(
      JSON.parse(messages[4]!.content[0]!.block.case === 'toolResult' ? messages[4]!.content[0]!.block.value.displayJson : '{}'),
    ).toEqual({ diff: '+x' });

    // Already Unrestricted: a second request is answered at once, without asking the user.
    await h.respond(next, { stopReason: StopReason.TOOL_USE, content: [toolUse('u2', 'request_mode_upgrade', { reason: 'again' })] });
    const third = await h.llmJob(id, 2);
    expect(toolResults(third).at(-1)!.content).toBe('Already in Unrestricted mode');
    const noPending = await rpcError(h.client().respondToModeUpgrade({ conversationId: id, approve: true }));
    expect(noPending.code).toBe(Code.FailedPrecondition);
    expect(noPending.rawMessage).toMatch(/no mode upgrade request/i);
  });

  it('on denial stays Restricted, answers the call without an error and refuses patch without a runner', async () => {
    const id = await awaitingApproval([{ id: 'p1', name: 'patch', input: { path: '/tmp/a.ts', patches: [] } }]);
    const res = await h.client().respondToModeUpgrade({ conversationId: id, approve: false });
    expect(res.conversation!.mode).toBe(Mode.RESTRICTED);
    const next = await h.llmJob(id, 1);
    expect(toolResults(next).map((r) => [r.toolUseId, r.content, r.isError])).toEqual([
      ['u1', UPGRADE_DENIED, false],
      ['p1', PATCH_RESTRICTED_ERROR, true],
    ]);
    expect(h.toolJobsOf(id)).toHaveLength(0);
    expect((await h.get(id)).messages.some((m) => m.type === MessageType.SYSTEM)).toBe(false);
    expect((await h.notifications(id)).some((e) => e.kind.case === 'modeChanged')).toBe(false);
  });
});

describe('downgrade', () => {
  it('applies at once, even mid-turn: the next tool runs Restricted and the notice follows the results', async () => {
    const id = await awaitingApproval([]);
    await h.client().respondToModeUpgrade({ conversationId: id, approve: true });
    const second = await h.llmJob(id, 1);
    await h.respond(second, {
      stopReason: StopReason.TOOL_USE,
      content: [toolUse('b1', 'bash', { command: 'make' }), toolUse('b2', 'bash', { command: 'make test' })],
    });
    const b1 = await h.toolJob(id, 'b1');
    expect(b1.mode).toBe(Mode.UNRESTRICTED);

    const res = await h.client().downgradeMode({ conversationId: id });
    expect(res.conversation!.mode).toBe(Mode.RESTRICTED);
    expect(res.conversation!.state!.kind).toBe(StateKind.TOOL_EXECUTING);
    await h.complete(b1, { content: 'built' });
    const b2 = await h.toolJob(id, 'b2');
    expect(b2.mode).toBe(Mode.RESTRICTED);
    expect(queueOf(h, id, 'b2')).toBe(QUEUE_TOOL_EXEC_RESTRICTED);
    await h.complete(b2, { content: 'tested' });
    const third = await h.llmJob(id, 2);
    expect(lastUserTurn(third)).toEqual(['result:b1', 'result:b2', `text:[System notice] ${MODE_NOTICE_RESTRICTED}`]);
    const changed = (await h.notifications(id)).flatMap((e) => (e.kind.case === 'modeChanged' ? [e.kind.value.mode] : []));
    expect(changed).toEqual([Mode.UNRESTRICTED, Mode.RESTRICTED]);

    const again = await rpcError(h.client().downgradeMode({ conversationId: id }));
    expect(again.code).toBe(Code.FailedPrecondition);
    expect(again.rawMessage).toMatch(/already in Restricted mode/);
    await h.respond(third, { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);
    expect((await h.get(id)).conversation!.mode).toBe(Mode.RESTRICTED);
  });
});

describe('sandbox availability reported by tool-runners', () => {
  it('decides whether Restricted mode exists for new conversations', async () => {
    // A runner without the kernel sandbox: Unrestricted only, and the user is told why.
    await ha.transport.runners.report(
      create(RunnerCapabilitiesSchema, { runnerId: 'plain', sandboxAvailable: false, queues: [QUEUE_TOOL_EXEC] }),
      60_000,
    );
    const plain = (await ha.client().createConversation({ cwd: '/tmp' })).conversation!;
    expect(plain.mode).toBe(Mode.UNRESTRICTED);
    expect(plain.sandboxAvailable).toBe(false);
    const refused = await rpcError(ha.client().downgradeMode({ conversationId: plain.id }));
    expect(refused.code).toBe(Code.FailedPrecondition);
    expect(refused.rawMessage).toMatch(/Restricted mode is unavailable/);
    await ha.client().sendMessage({ conversationId: plain.id, text: 'hi' });
    const job = await ha.llmJob(plain.id);
    expect(job.toolNames).not.toContain('request_mode_upgrade');
    expect(job.systemPrompt).toMatch(/sandbox is not available/);

    // A sandbox-capable runner appears: new conversations start Restricted (a fresh replica,
    // so the probe's short cache does not hide the report).
    await ha.transport.runners.report(
      create(RunnerCapabilitiesSchema, {
        runnerId: 'landlock',
        sandboxAvailable: true,
        landlockAbi: 4,
        queues: [QUEUE_TOOL_EXEC_RESTRICTED, QUEUE_TOOL_EXEC],
      }),
      60_000,
    );
    const replica = await ha.startReplica();
    const sandboxed = (await ha.client('alice', replica).createConversation({ cwd: '/tmp' })).conversation!;
    expect(sandboxed.mode).toBe(Mode.RESTRICTED);
    expect(sandboxed.sandboxAvailable).toBe(true);
    await ha.client('alice', replica).sendMessage({ conversationId: sandboxed.id, text: 'hi' });
    expect((await ha.llmJob(sandboxed.id)).toolNames).toContain('request_mode_upgrade');
    // An existing conversation keeps what it was created with.
    expect((await ha.get(plain.id)).conversation!.mode).toBe(Mode.UNRESTRICTED);
    expect(textOf((await ha.get(plain.id)).messages[0]!.content)).toBe('hi');
  });
});

it('sent only valid tool_use/tool_result chains to the model', () => {
  expect(h.chainProblems()).toEqual([]);
  expect(ha.chainProblems()).toEqual([]);
});
