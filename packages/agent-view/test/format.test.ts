/** The web UI's wording and arithmetic (src/format.ts), pure functions run in Node. */
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ContextUsageSchema, ConversationStateSchema, ErrorKind, MessageSchema, MessageType, Mode, StateKind } from '@bedrock/contracts';
import {
  canCancel,
  diffLines,
  formatTokens,
  imageProblem,
  isBusy,
  modeLine,
  patchDisplay,
  patchHunks,
  peakUsage,
  relativeTime,
  secondsLeft,
  stateLine,
  toolLabel,
  toolSummary,
  usageView,
} from '../src/format.ts';

const state = (init: Parameters<typeof create<typeof ConversationStateSchema>>[1]) => create(ConversationStateSchema, init);

describe('the state line', () => {
  it('says what the agent is doing', () => {
    expect(stateLine(state({ kind: StateKind.IDLE }), undefined, 0).text).toBe('Ready');
    expect(stateLine(state({ kind: StateKind.LLM_REQUESTING, attempt: 1, maxAttempts: 3 }), undefined, 0).text).toBe('Thinking…');
    expect(stateLine(state({ kind: StateKind.LLM_REQUESTING, attempt: 2, maxAttempts: 3 }), undefined, 0).text).toBe(
      'Thinking… (attempt 2 of 3)',
    );
    expect(
      stateLine(state({ kind: StateKind.TOOL_EXECUTING, toolIndex: 2, toolCount: 3, currentToolName: 'bash' }), undefined, 0).text,
    ).toBe('Running tool 2 of 3: bash');
    expect(stateLine(state({ kind: StateKind.AWAITING_SUB_AGENTS, subAgentCount: 3, pendingSubAgentIds: ['a'] }), undefined, 0).text).toBe(
      'Waiting for sub-agents: 2 of 3 finished',
    );
  });

  it('counts a retry down in whole seconds, rounded up', () => {
    const retry = { attempt: 2, maxAttempts: 3, at: 4000, errorKind: ErrorKind.SERVER, errorMessage: 'Overloaded' };
    const s = state({ kind: StateKind.LLM_REQUESTING, attempt: 2, maxAttempts: 3, retryDelayMs: 4000n });
    expect(stateLine(s, retry, 0)).toEqual({ text: 'Retrying: attempt 2 of 3 in 4s (server error)', tone: 'attention' });
    expect(stateLine(s, retry, 2100).text).toBe('Retrying: attempt 2 of 3 in 2s (server error)');
    expect(stateLine(s, retry, 4000).text).toBe('Retrying: attempt 2 of 3 now (server error)');
    expect(secondsLeft(1001, 0)).toBe(2);
  });

  it('shows an error with its kind', () => {
    const line = stateLine(
      state({ kind: StateKind.ERROR, errorKind: ErrorKind.RATE_LIMIT, errorMessage: 'Failed after 3 attempts: slow down' }),
      undefined,
      0,
    );
    expect(line.tone).toBe('error');
    expect(line.text).toBe('Error (rate limited): Failed after 3 attempts: slow down. Send a message to try again.');
    const long = stateLine(
      state({ kind: StateKind.ERROR, errorKind: ErrorKind.INVALID_REQUEST, errorMessage: `${'x'.repeat(200)}.` }),
      undefined,
      0,
    ).text;
    expect(long).toBe(`Error (invalid request): ${'x'.repeat(119)}… Send a message to try again.`);
  });

  it('knows which states are busy and cancellable', () => {
    expect(isBusy(StateKind.TOOL_EXECUTING)).toBe(true);
    expect(isBusy(StateKind.IDLE)).toBe(false);
    expect(isBusy(StateKind.CONTEXT_EXHAUSTED)).toBe(false);
    expect(canCancel(StateKind.CANCELLING)).toBe(false);
    expect(canCancel(StateKind.AWAITING_MODE_APPROVAL)).toBe(true);
  });
});

describe('the mode line', () => {
  it('names the three situations', () => {
    expect(modeLine(Mode.RESTRICTED, true)).toMatchObject({ label: 'Restricted', detail: 'read-only, sandboxed' });
    expect(modeLine(Mode.UNRESTRICTED, true).label).toBe('Unrestricted');
    expect(modeLine(Mode.UNRESTRICTED, false)).toMatchObject({ label: 'Sandbox unavailable', tone: 'unavailable' });
    // Where Unrestricted tools write, not "full access".
    expect(modeLine(Mode.UNRESTRICTED, true, { workspaceName: 'api', cwd: '/w/api' }).detail).toBe(
      'writes files in the workspace api (as its tool user may) and uses the network',
    );
    expect(modeLine(Mode.UNRESTRICTED, true, { cwd: '/srv/project' }).detail).toBe(
      'writes files in /srv/project (as its tool user may) and uses the network',
    );
    expect(modeLine(Mode.UNRESTRICTED, false, { cwd: '/srv/project' }).detail).toMatch(/writes files in \/srv\/project/);
  });
});

describe('context usage', () => {
  it('warns at 80% of the window', () => {
    expect(usageView(create(ContextUsageSchema, { usedTokens: 159_999n, contextWindow: 200_000n })).warning).toBe(false);
    const v = usageView(create(ContextUsageSchema, { usedTokens: 160_000n, contextWindow: 200_000n }));
    expect(v).toMatchObject({ warning: true, fraction: 0.8, text: '160k / 200k tokens (80%)' });
    expect(usageView(undefined).text).toBe('no usage yet');
    expect(formatTokens(950)).toBe('950');
    expect(formatTokens(12_345)).toBe('12.3k');
    expect(formatTokens(1_000_000)).toBe('1M');
  });
});

describe('tools and diffs', () => {
  it('summarises tool calls', () => {
    expect(toolSummary('bash', '{"command":"ls -la"}')).toBe('$ ls -la');
    expect(toolSummary('patch', '{"path":"src/a.ts","patches":[]}')).toBe('src/a.ts');
    expect(toolSummary('spawn_agents', '{"tasks":[{"task":"a"},{"task":"b"}]}')).toBe('2 sub-agents');
    expect(toolSummary('bash', 'not json')).toBe('$ ');
  });

  it('names an MCP tool by its server and tool, and its arguments on one line', () => {
    expect(toolLabel('mcp__fs__read_text_file')).toBe('fs › read_text_file');
    expect(toolLabel('mcp__everything__trigger-long-running-operation')).toBe('everything › trigger-long-running-operation');
    // A tool name with `__` in it keeps it: the server is the part before the first `__`.
    expect(toolLabel('mcp__my-srv__a__b')).toBe('my-srv › a__b');
    expect(toolLabel('bash')).toBe('bash');
    // Not a valid server name: shown as is.
    expect(toolLabel('mcp__Bad__x')).toBe('mcp__Bad__x');
    expect(toolSummary('mcp__fs__read_text_file', '{"path":"/w/note.txt","tail":5}')).toBe('path: "/w/note.txt", tail: 5');
    expect(toolSummary('mcp__everything__echo', '{}')).toBe('');
    const long = toolSummary('mcp__everything__echo', JSON.stringify({ message: 'x'.repeat(200) }));
    expect(long).toHaveLength(80);
    expect(long.endsWith('…')).toBe(true);
  });

  it('classifies diff lines and drops the Index header', () => {
    const diff = 'Index: a.txt\n===================\n--- a.txt\n+++ a.txt\n@@ -1,2 +1,2 @@\n keep\n-old\n+new\n';
    expect(diffLines(diff)).toEqual([
      { kind: 'meta', text: '--- a.txt' },
      { kind: 'meta', text: '+++ a.txt' },
      { kind: 'hunk', text: '@@ -1,2 +1,2 @@' },
      { kind: 'context', text: ' keep' },
      { kind: 'del', text: '-old' },
      { kind: 'add', text: '+new' },
    ]);
    expect(patchDisplay('{"path":"a.txt","created":false,"diff":"@@"}')).toEqual({ path: 'a.txt', created: false, diff: '@@' });
    expect(patchDisplay('{"diff":""}')).toBeUndefined();
    expect(patchDisplay('')).toBeUndefined();
  });

  it("reads the hunks of a unified diff as old and new text (the patch tool's diffs, as the diff package writes them)", () => {
    const rule = '===================================================================\n';
    // A new file: nothing replaced.
    expect(patchHunks(`${rule}--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+hello\n+world\n`)).toEqual([
      { oldText: '', newText: 'hello\nworld\n' },
    ]);
    // Context on both sides; two hunks.
    expect(patchHunks(`${rule}--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n@@ -11,2 +11,2 @@\n 11\n-12\n+twelve\n`)).toEqual([
      { oldText: '1\n2\n', newText: 'one\n2\n' },
      { oldText: '11\n12\n', newText: '11\ntwelve\n' },
    ]);
    // No newline at the end of either side.
    expect(
      patchHunks(`${rule}--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n`),
    ).toEqual([{ oldText: 'a\nb', newText: 'a\nc' }]);
    // Only the old side lacked it.
    expect(patchHunks('@@ -1 +1 @@\n-b\n\\ No newline at end of file\n+b\n')).toEqual([{ oldText: 'b', newText: 'b\n' }]);
    // A diff cut short (the display limit) keeps only its whole hunks.
    expect(patchHunks(`${rule}--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-1\n+one\n 2\n@@ -11,2 +11,2 @@\n 11\n-1`)).toEqual([
      { oldText: '1\n2\n', newText: 'one\n2\n' },
    ]);
    expect(patchHunks('')).toEqual([]);
  });

  it('accepts only the image types and sizes the service takes', () => {
    expect(imageProblem('image/png', 1000, 0)).toBeUndefined();
    expect(imageProblem('image/svg+xml', 1000, 0)).toMatch(/only PNG, JPEG, GIF and WebP/);
    expect(imageProblem('image/jpeg', 21 * 1024 * 1024, 0)).toMatch(/at most 20 MiB/);
    expect(imageProblem('image/webp', 10, 20)).toMatch(/at most 20 images/);
  });
});

describe('the context figure', () => {
  const usage = (usedTokens: bigint, contextWindow = 200_000n, warning = false) =>
    create(ContextUsageSchema, { usedTokens, contextWindow, warning });
  const agent = (inputTokens: bigint, outputTokens = 0n) =>
    create(MessageSchema, { type: MessageType.AGENT, usage: { inputTokens, outputTokens } });

  it('is the peak: after a continuation the last response is small, the window was full', () => {
    const after = peakUsage(usage(1_200n), [agent(185_000n, 500n), create(MessageSchema, { type: MessageType.CONTINUATION })]);
    expect(usageView(after).text).toBe('186k / 200k tokens (93%)');
    expect(after?.warning).toBe(true);
  });

  it('keeps the largest figure reported so far, and the service’s own when it is the largest', () => {
    expect(peakUsage(usage(10_000n), [], 150_000n)?.usedTokens).toBe(150_000n);
    expect(peakUsage(usage(170_000n, 200_000n, true), [agent(5n)], 20n)).toEqual({
      usedTokens: 170_000n,
      contextWindow: 200_000n,
      warning: true,
    });
    // Only the agent's responses count (a user message carries no usage of its own).
    expect(peakUsage(usage(0n), [create(MessageSchema, { type: MessageType.USER, usage: { inputTokens: 9n } })])?.usedTokens).toBe(0n);
    expect(peakUsage(undefined, [agent(9n)])).toBeUndefined();
  });
});

describe('relative times', () => {
  const now = new Date(2026, 10, 26, 15, 30, 0).getTime();
  const ago = (ms: number) => relativeTime(now - ms, now);

  it('says how long ago, as people say it', () => {
    expect(ago(5_000)).toBe('just now');
    expect(ago(-3_000)).toBe('just now');
    expect(ago(2 * 60_000)).toBe('2 min ago');
    expect(ago(59 * 60_000)).toBe('59 min ago');
    expect(ago(3 * 3_600_000)).toBe('3 h ago');
    expect(relativeTime(new Date(2026, 10, 25, 9, 0).getTime(), now)).toBe('yesterday');
    expect(relativeTime(new Date(2026, 10, 22, 9, 0).getTime(), now)).toBe('4 days ago');
    expect(relativeTime(new Date(2026, 2, 12, 9, 0).getTime(), now)).toBe('12 Mar');
    expect(relativeTime(new Date(2025, 2, 12, 9, 0).getTime(), now)).toBe('12 Mar 2025');
  });
});
