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
const toolUses = (blocks: readonly ScriptBlock[]) =>
  blocks.filter((b): b is Extract<ScriptBlock, { type: 'tool_use' }> => b.type === 'tool_use');
const text = (blocks: readonly ScriptBlock[]) => blocks.map((b) => (b.type === 'text' ? b.text : '')).join('');

/** Plays the assistant's tool calls back as the next turns, with given results. */
function answer(
  messages: Turn[],
  calls: Array<Extract<ScriptBlock, { type: 'tool_use' }>>,
  results: Array<{ content: string; is_error?: boolean }>,
): Turn[] {
  const withIds = calls.map((c, i) => ({ type: 'tool_use', id: `toolu_${i}`, name: c.name, input: c.input }) as ApiContentBlock);
  return [
    ...messages,
    { role: 'assistant', content: withIds },
    {
      role: 'user',
      content: withIds.map((c, i) => ({
        type: 'tool_result',
        tool_use_id: c.id,
        content: results[i]!.content,
        is_error: results[i]!.is_error ?? false,
      })),
    },
  ];
}

describe('offline model grammar', () => {
  it('runs `$ ` lines as bash calls in order, then summarises the outputs', () => {
    const first = [user('please:\n$ echo one\n$ ls -la\nnot a command\n$ false')];
    const reply = offlineReply(body(first));
    const calls = toolUses(reply.content);
    expect(calls.map((c) => c.input)).toEqual([{ command: 'echo one' }, { command: 'ls -la' }, { command: 'false' }]);
    expect(calls.every((c) => c.name === 'bash')).toBe(true);
    const next = offlineReply(
      body(answer(first, calls, [{ content: 'one' }, { content: 'total 0' }, { content: 'exit code 1', is_error: true }])),
    );
    expect(toolUses(next.content)).toEqual([]);
    const summary = text(next.content);
    expect(summary).toMatch(/`echo one` ok:\none/);
    expect(summary).toMatch(/`ls -la` ok:\ntotal 0/);
    expect(summary).toMatch(/`false` failed:\nexit code 1/);
  });

  it('turns /write PATH and the following lines into a patch overwrite', () => {
    const reply = offlineReply(body([user('/write src/a.txt\nline 1\nline 2')]));
    expect(toolUses(reply.content)).toEqual([
      expect.objectContaining({
        name: 'patch',
        input: { path: 'src/a.txt', patches: [{ operation: 'overwrite', new_text: 'line 1\nline 2\n' }] },
      }),
    ]);
  });

  it('maps /think, /upgrade and /agents to their tools', () => {
    expect(toolUses(offlineReply(body([user('/think plan the work')])).content)[0]).toMatchObject({
      name: 'think',
      input: { thoughts: 'plan the work' },
    });
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

  it('writes a continuation summary for a request with tool_choice none (the tools are offered, their use forbidden)', () => {
    const history = answer([user('$ ls')], [{ type: 'tool_use', name: 'bash', input: { command: 'ls' } }], [{ content: 'x' }]);
    const messages = [
      ...history,
      { role: 'assistant' as const, content: [{ type: 'text', text: 'done' }] },
      user('Summarise the session.'),
    ];
    const reply = offlineReply({ ...body(messages), tool_choice: { type: 'none' } });
    expect(toolUses(reply.content)).toEqual([]);
    expect(text(reply.content)).toMatch(/Session summary \(offline demo model\): 2 user message\(s\), 1 tool call\(s\) \(bash\)/);
    // Not by an empty tool list: a request without tools is answered as usual.
    expect(text(offlineReply(body(messages, [])).content)).not.toMatch(/Session summary/);
  });
});

describe('offline model after a cancel', () => {
  it('takes a message that shares a user turn with cancelled results as the new instruction', () => {
    const first = [user('$ sleep 20')];
    const calls = toolUses(offlineReply(body(first)).content);
    const afterCancel = answer(first, calls, [{ content: 'Cancelled by user', is_error: true }]);
    // The history builder merges the next message into the user turn holding the synthetic result.
    const last = afterCancel[afterCancel.length - 1]!;
    const merged: Turn = {
      role: 'user',
      content: [...(last.content as ApiContentBlock[]), { type: 'text', text: '/upgrade I need to write' }],
    };
    const reply = offlineReply(body([...afterCancel.slice(0, -1), merged]));
    expect(toolUses(reply.content).map((c) => [c.name, c.input])).toEqual([['request_mode_upgrade', { reason: 'I need to write' }]]);
  });

  it('does not take a system notice beside tool results for an instruction', () => {
    const first = [user('/upgrade write access')];
    const calls = toolUses(offlineReply(body(first)).content);
    const approved = answer(first, calls, [{ content: 'The user approved the upgrade.' }]);
    const last = approved[approved.length - 1]!;
    const withNotice: Turn = {
      role: 'user',
      content: [...(last.content as ApiContentBlock[]), { type: 'text', text: '[System notice] Mode changed to Unrestricted' }],
    };
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

describe('offline model: thinking and cuts', () => {
  const withThinking = (b: MessagesRequestBody, thinking: MessagesRequestBody['thinking']): MessagesRequestBody => ({ ...b, thinking });

  it('/think-long: with thinking on, a long thinking block before the answer; with it off, the answer says so', () => {
    for (const thinking of [{ type: 'adaptive' }, { type: 'enabled', budget_tokens: 2000 }]) {
      const reply = offlineReply(withThinking(body([user('/think-long the cache layout')]), thinking));
      expect(reply.content.map((b) => b.type)).toEqual(['thinking', 'text']);
      const thought = (reply.content[0] as Extract<ScriptBlock, { type: 'thinking' }>).thinking;
      expect(thought.split('\n\n').length).toBeGreaterThanOrEqual(5);
      expect(thought).toContain('the cache layout');
      expect(thought.length).toBeGreaterThan(1000);
      expect((reply.content[0] as { signature?: unknown }).signature).toBeUndefined(); // the server signs it
      expect(text(reply.content)).toMatch(/^After thinking over "the cache layout" \(offline demo model\): the thinking above/);
    }
    for (const b of [
      body([user('/think-long the cache layout')]),
      withThinking(body([user('/think-long the cache layout')]), { type: 'disabled' }),
    ]) {
      const reply = offlineReply(b);
      expect(reply.content.map((c) => c.type)).toEqual(['text']);
      expect(text(reply.content)).toMatch(/^Thinking is off for this request, so I answer without a thinking block/);
    }
  });

  it('/cut PATH: cut by max_tokens below 64000, complete at 64000', () => {
    const ask = (maxTokens: number) => offlineReply({ ...body([user('/cut big/file.txt')]), max_tokens: maxTokens });
    for (const maxTokens of [1000, 32000, 63999]) {
      const cut = ask(maxTokens);
      expect(cut.stopReason).toBe('max_tokens');
      expect(cut.usage).toEqual({ output_tokens: maxTokens });
      expect(cut.content[0]).toEqual({ type: 'text', text: 'Writing big/file.txt (2000 lines) in one patch call.' });
      const call = cut.content[1] as Extract<ScriptBlock, { type: 'tool_use' }>;
      expect(call.name).toBe('patch');
      expect(call.partialJsonChars).toBeGreaterThan(0);
      expect(call.partialJsonChars).toBeLessThan(JSON.stringify(call.input).length);
    }
    const whole = ask(64000);
    expect(whole.stopReason).toBeUndefined(); // tool_use, by default
    const call = whole.content[1] as Extract<ScriptBlock, { type: 'tool_use' }>;
    expect(call.partialJsonChars).toBeUndefined();
    const input = call.input as { path: string; patches: Array<{ operation: string; new_text: string }> };
    expect(input.path).toBe('big/file.txt');
    expect(input.patches[0]!.operation).toBe('overwrite');
    expect(input.patches[0]!.new_text.split('\n')).toHaveLength(2001);
    // Its result comes back: a summary, as for every call.
    const done = offlineReply({
      ...body(answer([user('/cut big/file.txt')], [call], [{ content: 'wrote big/file.txt' }])),
      max_tokens: 64000,
    });
    expect(text(done.content)).toMatch(/^Done \(offline demo model\)\. 1 tool call\(s\):\n1\. patch ok/);
  });

  it('/cut-never: cut at any max_tokens; told about the cut, it answers that it will split the work', () => {
    for (const maxTokens of [1000, 64000]) {
      const cut = offlineReply({ ...body([user('/cut-never')]), max_tokens: maxTokens });
      expect(cut.stopReason).toBe('max_tokens');
      expect((cut.content[1] as Extract<ScriptBlock, { type: 'tool_use' }>).partialJsonChars).toBeDefined();
      expect((cut.content[1] as Extract<ScriptBlock, { type: 'tool_use' }>).input).toMatchObject({ path: 'huge.txt' });
    }
    const told = offlineReply({
      ...body([
        user('/cut-never'),
        { role: 'assistant', content: [{ type: 'text', text: 'Writing huge.txt (2000 lines) in one patch call.' }] },
        user('[System notice] Your call to patch was cut by the output limit (64000 tokens). Split the work into smaller calls.'),
      ]),
      max_tokens: 64000,
    });
    expect(told.stopReason).toBeUndefined();
    expect(toolUses(told.content)).toEqual([]);
    expect(text(told.content)).toMatch(/I will split the work into several smaller writes/);
  });

  it('parses the new commands', () => {
    expect(parseOfflineCommand('/think-long a\nb').command).toEqual({ kind: 'think-long', topic: 'a\nb' });
    expect(parseOfflineCommand('/cut a.txt').command).toEqual({ kind: 'cut', path: 'a.txt', always: false });
    expect(parseOfflineCommand('/cut-never').command).toEqual({ kind: 'cut', path: 'huge.txt', always: true });
    expect(parseOfflineCommand('/cut-never b.txt').command).toEqual({ kind: 'cut', path: 'b.txt', always: true });
    expect(parseOfflineCommand('/think deeply').command).toEqual({ kind: 'think', thoughts: 'deeply' });
    expect(parseOfflineCommand('/cut').command).toEqual({ kind: 'help' });
  });
});
