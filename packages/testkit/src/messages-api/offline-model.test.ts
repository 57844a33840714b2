import { describe, it, expect } from '@jest/globals';
import { offlineReply, parseOfflineCommand, OFFLINE_INTRO } from './offline-model.ts';
import type { ApiContentBlock, MessagesRequestBody, ScriptBlock } from './script.ts';

const PARENT_TOOLS = ['bash', 'patch', 'keyword_search', 'think', 'spawn_agents', 'request_mode_upgrade'];
const SUB_TOOLS = ['bash', 'patch', 'keyword_search', 'think', 'submit_result'];

type Turn = MessagesRequestBody['messages'][number];
const user = (text: string): Turn => ({ role: 'user', content: [{ type: 'text', text }] });
const body = (messages: Turn[], tools = PARENT_TOOLS): MessagesRequestBody => ({
  model: 'bedrock-offline',
  max_tokens: 1000,
  tools: tools.map((name) => ({ name })),
  messages,
});
const toolUses = (blocks: readonly ScriptBlock[]) => blocks.filter((b): b is Extract<ScriptBlock, { type: 'tool_use' }> => b.type === 'tool_use');
const text = (blocks: readonly ScriptBlock[]) => blocks.map((b) => (b.type === 'text' ? b.text : '')).join('');

/** Plays the assistant's tool calls back as the next turns, with given results. */
function answer(messages: Turn[], calls: Array<Extract<ScriptBlock, { type: 'tool_use' }>>, results: Array<{ content: string; is_error?: boolean }>): Turn[] {
  const withIds = calls.map((c, i) => ({ type: 'tool_use', id: `toolu_${i}`, name: c.name, input: c.input }) as ApiContentBlock);
  return [
    ...messages,
    { role: 'assistant', content: withIds },
    { role: 'user', content: withIds.map((c, i) => ({ type: 'tool_result', tool_use_id: c.id, content: results[i]!.content, is_error: results[i]!.is_error ?? false })) },
  ];
}

describe('offline model grammar', () => {
  it('runs `$ ` lines as bash calls in order, then summarises the outputs', () => {
    const first = [user('please:\n$ echo one\n$ ls -la\nnot a command\n$ false')];
    const reply = offlineReply(body(first));
    const calls = toolUses(reply.content);
    expect(calls.map((c) => c.input)).toEqual([{ command: 'echo one' }, { command: 'ls -la' }, { command: 'false' }]);
    expect(calls.every((c) => c.name === 'bash')).toBe(true);
    const next = offlineReply(body(answer(first, calls, [{ content: 'one' }, { content: 'total 0' }, { content: 'exit code 1', is_error: true }])));
    expect(toolUses(next.content)).toEqual([]);
    const summary = text(next.content);
    expect(summary).toMatch(/`echo one` ok:\none/);
    expect(summary).toMatch(/`ls -la` ok:\ntotal 0/);
    expect(summary).toMatch(/`false` failed:\nexit code 1/);
  });

  it('turns /write PATH and the following lines into a patch overwrite', () => {
    const reply = offlineReply(body([user('/write src/a.txt\nline 1\nline 2')]));
    expect(toolUses(reply.content)).toEqual([
      expect.objectContaining({ name: 'patch', input: { path: 'src/a.txt', patches: [{ operation: 'overwrite', new_text: 'line 1\nline 2\n' }] } }),
    ]);
  });

  it('maps /think, /upgrade and /agents to their tools', () => {
    expect(toolUses(offlineReply(body([user('/think plan the work')])).content)[0]).toMatchObject({ name: 'think', input: { thoughts: 'plan the work' } });
    expect(toolUses(offlineReply(body([user('/upgrade need to write files')])).content)[0]).toMatchObject({
      name: 'request_mode_upgrade',
      input: { reason: 'need to write files' },
    });
    expect(toolUses(offlineReply(body([user('/agents $ ls | $ pwd |  count files ')])).content)[0]).toMatchObject({
      name: 'spawn_agents',
      input: { tasks: [{ task: '$ ls' }, { task: '$ pwd' }, { task: 'count files' }] },
    });
  });

  it('says so instead of calling a tool that is not offered', () => {
    const reply = offlineReply(body([user('/upgrade please')], ['bash', 'think']));
    expect(toolUses(reply.content)).toEqual([]);
    expect(text(reply.content)).toMatch(/request_mode_upgrade tool is not offered/);
  });

  it('as a sub-agent, runs the task and calls submit_result', () => {
    const first = [user('$ ls')];
    const run = toolUses(offlineReply(body(first, SUB_TOOLS)).content);
    expect(run).toEqual([expect.objectContaining({ name: 'bash', input: { command: 'ls' } })]);
    const submit = toolUses(offlineReply(body(answer(first, run, [{ content: 'a.txt' }]), SUB_TOOLS)).content);
    expect(submit).toHaveLength(1);
    expect(submit[0]).toMatchObject({ name: 'submit_result', input: { success: true } });
    expect((submit[0]!.input as { result: string }).result).toMatch(/`ls` ok:\na.txt/);
    const failed = toolUses(offlineReply(body(answer(first, run, [{ content: 'boom', is_error: true }]), SUB_TOOLS)).content);
    expect(failed[0]).toMatchObject({ name: 'submit_result', input: { success: false } });
    const nothing = toolUses(offlineReply(body([user('count the files')], SUB_TOOLS)).content);
    expect(nothing[0]).toMatchObject({ name: 'submit_result', input: { result: expect.stringMatching(/Nothing to run/) } });
  });

  it('reports N input tokens for /usage N, alone or with another command', () => {
    const alone = offlineReply(body([user('/usage 181000')]));
    expect(alone.usage).toEqual({ input_tokens: 181000 });
    expect(text(alone.content)).toMatch(/181000 input tokens/);
    const withBash = offlineReply(body([user('/usage 190000\n$ ls')]));
    expect(withBash.usage).toEqual({ input_tokens: 190000 });
    expect(toolUses(withBash.content)).toHaveLength(1);
    expect(parseOfflineCommand('/usage 5').inputTokens).toBe(5);
  });

  it('explains the commands and introduces itself as the offline demo model otherwise', () => {
    const reply = offlineReply(body([user('hello, who are you?')]));
    expect(toolUses(reply.content)).toEqual([]);
    expect(text(reply.content)).toContain(OFFLINE_INTRO);
    expect(text(reply.content)).toMatch(/\/write PATH/);
    expect(reply.model).toBe('bedrock-offline');
  });

  it('writes a continuation summary when no tools are offered', () => {
    const history = answer([user('$ ls')], [{ type: 'tool_use', name: 'bash', input: { command: 'ls' } }], [{ content: 'x' }]);
    const reply = offlineReply(body([...history, { role: 'assistant', content: [{ type: 'text', text: 'done' }] }, user('Summarise the session.')], []));
    expect(toolUses(reply.content)).toEqual([]);
    expect(text(reply.content)).toMatch(/Session summary \(offline demo model\): 2 user message\(s\), 1 tool call\(s\) \(bash\)/);
  });
});

describe('offline model after a cancel', () => {
  it('takes a message that shares a user turn with cancelled results as the new instruction', () => {
    const first = [user('$ sleep 20')];
    const calls = toolUses(offlineReply(body(first)).content);
    const afterCancel = answer(first, calls, [{ content: 'Cancelled by user', is_error: true }]);
    // The history builder merges the next message into the user turn holding the synthetic result.
    const last = afterCancel[afterCancel.length - 1]!;
    const merged: Turn = { role: 'user', content: [...(last.content as ApiContentBlock[]), { type: 'text', text: '/upgrade I need to write' }] };
    const reply = offlineReply(body([...afterCancel.slice(0, -1), merged]));
    expect(toolUses(reply.content).map((c) => [c.name, c.input])).toEqual([['request_mode_upgrade', { reason: 'I need to write' }]]);
  });

  it('does not take a system notice beside tool results for an instruction', () => {
    const first = [user('/upgrade write access')];
    const calls = toolUses(offlineReply(body(first)).content);
    const approved = answer(first, calls, [{ content: 'The user approved the upgrade.' }]);
    const last = approved[approved.length - 1]!;
    const withNotice: Turn = { role: 'user', content: [...(last.content as ApiContentBlock[]), { type: 'text', text: '[System notice] Mode changed to Unrestricted' }] };
    const reply = offlineReply(body([...approved.slice(0, -1), withNotice]));
    expect(toolUses(reply.content)).toEqual([]);
    expect(text(reply.content)).toMatch(/request_mode_upgrade ok/);
  });
});

describe('offline model parsing', () => {
  it('finds a slash command after other text in the same turn', () => {
    const parsed = parseOfflineCommand('[Mode changed to Unrestricted.]\n/write a.txt\nhello');
    expect(parsed.command).toEqual({ kind: 'write', path: 'a.txt', text: 'hello\n' });
    expect(parseOfflineCommand('note\n/think  deeply').command).toEqual({ kind: 'think', thoughts: 'deeply' });
    expect(parseOfflineCommand('/usage 7\nplain words').command).toEqual({ kind: 'help' });
    expect(parseOfflineCommand('/agents').command).toEqual({ kind: 'help' });
  });
});
