/**
 * The `bedrock` CLI as a user runs it (the workspace bin, a separate process) against the real
 * web-bff and conversation service; the test plays the gateway and the tool-runner.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { StopReason, TokenDeltaKind, type ContentBlockSchema } from '@bedrock/contracts';
import { run } from '../src/run.ts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';

const BIN = resolve('node_modules/.bin/bedrock');

let s: System;
let stopAgent = false;
let agent: Promise<void>;

beforeAll(async () => {
  s = await startSystem({ label: 'cli' });
  agent = playAgent();
});
afterAll(async () => {
  stopAgent = true;
  await agent;
  await s?.close();
});

/**
 * A scripted agent: "hello" → streams "Hel" + "lo!" and answers; "run ls" → calls bash, then
 * answers "listed"; "write" → asks for write access; "hang" → never answers (for cancel);
 * "think" → streams its thinking, then its answer; "search" → a web search and a cited answer;
 * "refuse" → declines with an explanation; "long" → is cut by the output limit (and continued).
 */
async function playAgent(): Promise<void> {
  const handledLlm = new Set<string>();
  const handledTools = new Set<string>();
  while (!stopAgent) {
    for (const job of s.llmJobs) {
      if (handledLlm.has(job.requestId)) continue;
      handledLlm.add(job.requestId);
      const lastUser = job.messages.at(-1);
      const block = [...(lastUser?.content ?? [])].reverse().find((b) => b.block.case === 'text' || b.block.case === 'toolResult');
      const said = block?.block.case === 'text' ? block.block.value.text : block?.block.case === 'toolResult' ? '<tool result>' : '';
      const usage = { inputTokens: 50n, outputTokens: 5n };
      const reply = (
        content: MessageInitShape<typeof ContentBlockSchema>[],
        stopReason = StopReason.END_TURN,
        more: { stopExplanation?: string } = {},
      ) =>
        s.send(job.conversationId, `r/${job.requestId}`, {
          case: 'llmResponse',
          value: { requestId: job.requestId, stopReason, usage, content, ...more },
        });
      const text = (t: string, citationsJson = '') => ({ block: { case: 'text' as const, value: { text: t, citationsJson } } });
      if (said === 'hang') continue;
      if (said === 'hello') {
        await s.delta(job.conversationId, job.requestId, 'Hel');
        await s.delta(job.conversationId, job.requestId, 'lo!');
        await reply([{ block: { case: 'text', value: { text: 'Hello!' } } }]);
      } else if (said === 'run ls') {
        await reply(
          [{ block: { case: 'toolUse', value: { id: `tu_${job.requestId.slice(-8)}`, name: 'bash', inputJson: '{"command":"ls"}' } } }],
          StopReason.TOOL_USE,
        );
      } else if (said === 'think') {
        await s.delta(job.conversationId, job.requestId, 'Let me ', { kind: TokenDeltaKind.THINKING });
        await s.delta(job.conversationId, job.requestId, 'think.', { kind: TokenDeltaKind.THINKING });
        await s.delta(job.conversationId, job.requestId, 'Thought it through.', { blockIndex: 1 });
        await reply([
          { block: { case: 'thinking', value: { thinking: 'Let me think.', signature: 'c2ln' } } },
          text('Thought it through.'),
        ]);
      } else if (said === 'search') {
        const source = { url: 'https://en.wikipedia.org/wiki/Bedrock', title: 'Bedrock - Wikipedia' };
        const serverTool = (json: Record<string, unknown>) => ({
          block: { case: 'serverTool' as const, value: { blockType: String(json.type), blockJson: JSON.stringify(json) } },
        });
        await reply([
          serverTool({ type: 'server_tool_use', id: 'srvtoolu_1', name: 'web_search', input: { query: 'what is bedrock' } }),
          serverTool({
            type: 'web_search_tool_result',
            tool_use_id: 'srvtoolu_1',
            content: [{ type: 'web_search_result', ...source, encrypted_content: 'ZQ==' }],
          }),
          text(
            'Bedrock is solid rock.',
            JSON.stringify([{ type: 'web_search_result_location', ...source, encrypted_index: 'eA==', cited_text: 'Bedrock is' }]),
          ),
        ]);
      } else if (said === 'refuse') {
        await reply([text('I')], StopReason.REFUSAL, { stopExplanation: 'It asks for harm.' });
      } else if (said === 'long') {
        await reply([text('Part one')], StopReason.MAX_TOKENS);
      } else if (said === 'write') {
        await reply(
          [
            {
              block: {
                case: 'toolUse',
                value: { id: `up_${job.requestId.slice(-8)}`, name: 'request_mode_upgrade', inputJson: '{"reason":"to fix the bug"}' },
              },
            },
          ],
          StopReason.TOOL_USE,
        );
      } else {
        await reply([{ block: { case: 'text', value: { text: said === '<tool result>' ? 'listed' : `echo: ${said}` } } }]);
      }
    }
    for (const job of s.toolJobs) {
      if (handledTools.has(job.toolUseId)) continue;
      handledTools.add(job.toolUseId);
      await s.send(job.conversationId, `tool/${job.toolUseId}`, {
        case: 'toolComplete',
        value: { toolUseId: job.toolUseId, content: 'a.txt\nb.txt' },
      });
    }
    await new Promise((r) => setTimeout(r, 20));
  }
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process (the same `run` the bin calls), capturing its output. */
async function bedrock(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, HOME: '/nonexistent', ...env },
    {
      out: (t) => void (stdout += t),
      err: (t) => void (stderr += t),
    },
  );
  return { code, stdout, stderr };
}

/** Runs the real `bedrock` bin of the workspace as a separate process. */
function bedrockBin(args: string[], env: Record<string, string | undefined> = {}): Promise<Run> {
  return new Promise((resolveRun) => {
    execFile(
      BIN,
      args,
      {
        env: { PATH: process.env.PATH, HOME: process.env.HOME, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice, ...env },
        timeout: 30_000,
      },
      (err, stdout, stderr) => resolveRun({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

describe('bedrock CLI', () => {
  it('new prints the id alone; ls lists it; show prints it', async () => {
    const created = await bedrockBin(['new', '--cwd', '/tmp', '--model', 'claude-haiku-4-5']);
    expect(created.code).toBe(0);
    expect(created.stdout).toMatch(/^[0-9a-f-]{36}\n$/);
    const id = created.stdout.trim();
    const ls = await bedrock(['ls']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toContain(id);
    const lsJson = await bedrock(['ls', '--json']);
    const rows = lsJson.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rows.find((r: { id: string }) => r.id === id)).toMatchObject({ cwd: '/tmp', model: 'claude-haiku-4-5' });
    const shown = await bedrock(['show', id]);
    expect(shown.stdout).toContain('state: idle');
  });

  it('send --wait streams the turn with tool activity and returns at rest; show --json has every message, call and result', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const hello = await bedrockBin(['send', id, 'hello', '--wait']);
    expect(hello.code).toBe(0);
    expect(hello.stdout).toContain('Hello!');
    expect(hello.stderr).toMatch(/· idle/);
    const tool = await bedrock(['send', id, 'run ls', '--wait']);
    expect(tool.code).toBe(0);
    expect(tool.stdout).toContain('⏺ bash {"command":"ls"}');
    expect(tool.stdout).toContain('⏺ bash {"command":"ls"}\n    a.txt\n    b.txt\n  → ok\n');
    expect(tool.stdout).toContain('listed');

    const shown = await bedrock(['show', id, '--json']);
    const doc = JSON.parse(shown.stdout);
    expect(doc.conversation.id).toBe(id);
    const blocks = doc.messages.flatMap((m: { content: object[] }) => m.content);
    expect(blocks).toEqual(
      expect.arrayContaining([
        { text: { text: 'hello' } },
        { toolUse: expect.objectContaining({ name: 'bash', inputJson: '{"command":"ls"}' }) },
        { toolResult: expect.objectContaining({ content: 'a.txt\nb.txt' }) },
        { text: { text: 'listed' } },
      ]),
    );
  }, 60_000);

  it('send --wait right after another send prints only its own turn', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    for (let i = 0; i < 3; i++) {
      const hello = await bedrockBin(['send', id, 'hello', '--wait']);
      expect(hello.code).toBe(0);
      const tool = await bedrockBin(['send', id, 'run ls', '--wait']);
      expect(tool.code).toBe(0);
      // The previous turn's answer is not printed again before this one's.
      expect(tool.stdout).not.toContain('Hello!');
      expect(tool.stdout.match(/⏺ bash/g)).toHaveLength(1);
      expect(tool.stdout).toMatch(/^⏺ bash/);
    }
  }, 90_000);

  it('takes a short unique prefix wherever an id goes; an ambiguous one lists the matches; show numbers the messages', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect((await bedrock(['send', id.slice(0, 8), 'run ls', '--wait'])).code).toBe(0);
    const shown = await bedrock(['show', id.slice(0, 6)]);
    expect(shown.code).toBe(0);
    expect(shown.stdout.split('\n')[1]).toBe(`${id}  /tmp  model ${shown.stdout.split('model ')[1]!.split('\n')[0]}`);
    // Only what `show` takes: no slug beside the id.
    expect(shown.stdout).not.toMatch(new RegExp(`${id} \\(`));
    expect(shown.stdout).toMatch(/^#1 user: run ls$/m);
    expect(shown.stdout).toMatch(/^#2 tool bash \{"command":"ls"\}\n {4}a\.txt\n {4}b\.txt\n {2}→ ok$/m);
    expect(shown.stdout).toMatch(/^#4 agent: listed$/m);
    const fork = await bedrock(['fork', id.slice(0, 8), '--at', '3']);
    expect(fork.code).toBe(0);
    // Every conversation id starts with one of 16 hex digits: with enough of them, a one-digit prefix fits several.
    const all = (await bedrock(['ls', '--all', '--archived', '--json'])).stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l).id as string);
    const digit = [...'0123456789abcdef'].find((d) => all.filter((i) => i.startsWith(d)).length > 1);
    if (digit) {
      const ambiguous = await bedrock(['show', digit]);
      expect(ambiguous.code).toBe(2);
      expect(ambiguous.stderr).toMatch(new RegExp(`^bedrock: "${digit}" fits more than one conversation: ${digit}[0-9a-f-]{35} `));
      expect(ambiguous.stderr).toContain('give more of the id');
    }
    const none = await bedrock(['watch', 'fffffffff']);
    expect(none.code).toBe(3);
    expect(none.stderr).toContain('no conversation of yours has an id starting with "fffffffff"');
  }, 60_000);

  it('send --wait --json prints NDJSON events; watch --json streams them', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const watcher = spawn(BIN, ['watch', id, '--json'], {
      env: { PATH: process.env.PATH, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice },
    });
    let watched = '';
    watcher.stdout.on('data', (d: Buffer) => (watched += d.toString()));
    await s.waitFor('watch snapshot', () => watched.includes('"snapshot"'), 20_000);
    const sent = await bedrock(['send', id, 'hello', '--wait', '--json']);
    expect(sent.code).toBe(0);
    const events = sent.stdout
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(
      events.map((e: Record<string, unknown>) => Object.keys(e).find((k) => !['conversationId', 'sequence', 'deltaIndex'].includes(k))),
    ).toEqual(expect.arrayContaining(['messagePersisted', 'stateChanged', 'tokenDelta']));
    await s.waitFor('watched the turn', () => watched.includes('"Hello!"'), 20_000);
    watcher.kill('SIGINT');
    await new Promise((r) => watcher.once('exit', r));
    for (const line of watched.trim().split('\n')) expect(() => JSON.parse(line)).not.toThrow();
  }, 60_000);

  it('cancel stops a busy turn; approve and deny answer an upgrade request; downgrade and continue act', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect((await bedrock(['send', id, 'hang'])).code).toBe(0);
    const busy = await bedrock(['send', id, 'again']);
    expect(busy.code).toBe(3);
    expect(busy.stderr).toMatch(/FailedPrecondition: .*busy/i);
    // What to do about it: the delivery modes.
    expect(busy.stderr).toMatch(/--queue .*--steer .*--interrupt/);
    const cancelled = await bedrock(['cancel', id]);
    expect(cancelled.code).toBe(0);
    expect(cancelled.stdout).toMatch(/cancelling|idle/);
    await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'), 20_000);

    const write = await bedrock(['send', id, 'write', '--wait']);
    expect(write.code).toBe(5);
    expect(write.stderr).toMatch(/write access/);
    const approved = await bedrock(['approve', id, '--json']);
    expect(approved.code).toBe(0);
    expect(JSON.parse(approved.stdout).conversation.mode).toBe('MODE_UNRESTRICTED');
    const downgraded = await bedrock(['downgrade', id, '--json']);
    expect(downgraded.code).toBe(0);
    expect(JSON.parse(downgraded.stdout).conversation.mode).toBe('MODE_RESTRICTED');
    await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'), 20_000);
    expect((await bedrock(['send', id, 'write', '--wait'])).code).toBe(5);
    const denied = await bedrock(['deny', id]);
    expect(denied.code).toBe(0);
    await s.waitFor('idle', async () => (await bedrock(['show', id])).stdout.includes('state: idle'), 20_000);
    const cont = await bedrock(['continue', id]);
    expect(cont.code).toBe(0);
  }, 90_000);

  it('send --queue keeps a message while the agent works; --interrupt cancels the turn and sends; one mode at a time, for send only', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    expect((await bedrock(['send', id, 'hang'])).code).toBe(0);
    const queued = await bedrock(['send', id, 'hello', '--queue']);
    expect(queued.code).toBe(0);
    expect(queued.stdout.trim()).toBe(`${id}/q/2`);
    expect(queued.stderr).toMatch(/waits \(queue\)/);
    const shown = JSON.parse((await bedrock(['show', id, '--json'])).stdout) as { conversation: { state: { pendingMessages: unknown[] } } };
    expect(shown.conversation.state.pendingMessages).toEqual([expect.objectContaining({ text: 'hello', delivery: 'DELIVERY_MODE_QUEUE' })]);
    expect((await bedrock(['send', id, 'x', '--queue', '--steer'])).code).toBe(2);
    expect((await bedrock(['show', id, '--steer'])).code).toBe(2);
    // Cancels the hanging request (its acknowledgement never comes: the cancel times out), then
    // sends; the queued message follows; --wait returns when the conversation rests.
    const interrupted = await bedrock(['send', id, 'hello', '--interrupt', '--wait']);
    expect(interrupted.code).toBe(0);
    const after = JSON.parse((await bedrock(['show', id, '--json'])).stdout) as {
      conversation: { state: { kind: string; pendingMessages?: unknown[] } };
      messages: { type: string; content: { text?: { text: string } }[] }[];
    };
    expect(after.conversation.state.pendingMessages ?? []).toEqual([]);
    const users = after.messages.filter((m) => m.type === 'MESSAGE_TYPE_USER').map((m) => m.content[0]?.text?.text);
    expect(users).toEqual(['hang', 'hello', 'hello']);
  }, 60_000);

  it('prints thinking under its label (or not, with --hide-thinking), web searches with their sources, and the markers of a cut and a refusal', async () => {
    const id = (await bedrock(['new', '--cwd', '/tmp'])).stdout.trim();
    const think = await bedrock(['send', id, 'think', '--wait']);
    expect(think.code).toBe(0);
    // Captured output is no terminal: no ANSI styles.
    expect(think.stdout).toContain('thinking:\nLet me think.\nThought it through.\n');
    expect(think.stdout).not.toContain('\x1b[');
    const hidden = await bedrock(['send', id, 'think', '--wait', '--hide-thinking']);
    expect(hidden.stdout).toContain('Thought it through.');
    expect(hidden.stdout).not.toMatch(/thinking:|Let me think/);

    const search = await bedrock(['send', id, 'search', '--wait']);
    expect(search.stdout).toContain(
      [
        '⏺ searched: what is bedrock',
        '  → 1 result: Bedrock - Wikipedia',
        'Bedrock is solid rock. [1]',
        '  [1] Bedrock - Wikipedia https://en.wikipedia.org/wiki/Bedrock',
      ].join('\n'),
    );

    const refused = await bedrock(['send', id, 'refuse', '--wait']);
    expect(refused.code).toBe(0);
    expect(refused.stdout).toMatch(/^✗ The model declined to answer.*It asks for harm\./m);
    // Said once: the marker carries the error message the service adds.
    expect(refused.stdout.match(/declined/g)).toHaveLength(1);
    expect(refused.stdout.match(/It asks for harm/g)).toHaveLength(1);

    const long = await bedrock(['send', id, 'long', '--wait']);
    expect(long.code).toBe(0);
    expect(long.stdout).toContain('Part one\n⋯ Cut by the output limit — continued below.\n');
    expect(long.stdout).toMatch(/^system: .*limit/m);
    expect(long.stdout).toMatch(/^echo: /m);

    const shown = await bedrock(['show', id]);
    expect(shown.stdout).toContain('thinking:\n  Let me think.\nagent: Thought it through.');
    expect(shown.stdout).toContain('⋯ Cut by the output limit — continued below.');
    expect(shown.stdout.match(/declined/g)).toHaveLength(1);
    expect((await bedrock(['show', id, '--hide-thinking'])).stdout).not.toContain('Let me think.');
  }, 90_000);

  it('new --thinking and the web tool flags choose the settings; settings shows and changes them', async () => {
    const created = await bedrock(['new', '--cwd', '/tmp', '--thinking', 'low', '--json']);
    expect(created.code).toBe(0);
    const c = JSON.parse(created.stdout);
    expect(c.thinking).toBe('THINKING_LEVEL_LOW');
    expect((await bedrock(['settings', c.id])).stdout).toBe('thinking: low · web tools: none\n');
    const changed = await bedrock(['settings', c.id, '--thinking', 'max']);
    expect([changed.code, changed.stdout]).toEqual([0, 'thinking: max · web tools: none\n']);
    expect(JSON.parse((await bedrock(['show', c.id, '--json'])).stdout).conversation.thinking).toBe('THINKING_LEVEL_MAX');
    // This deployment allows no web tools: the service says so, the CLI exits 3.
    const fetch = await bedrock(['settings', c.id, '--web-fetch']);
    expect(fetch.code).toBe(3);
    expect(fetch.stderr).toMatch(/^bedrock: InvalidArgument: .*web_fetch/);
    const search = await bedrock(['new', '--cwd', '/tmp', '--web-search']);
    expect(search.code).toBe(3);
    expect(search.stderr).toMatch(/web_search/);
    expect((await bedrock(['settings', c.id, '--thinking', 'extreme'])).code).toBe(2);
  }, 60_000);

  it('distinguishes usage errors, rejections and server errors by exit code', async () => {
    expect((await bedrockBin(['send', 'only-an-id'])).code).toBe(2);
    expect((await bedrock(['frobnicate'])).code).toBe(2);
    expect((await bedrock(['ls', '--bogus'])).code).toBe(2);
    const missing = await bedrock(['show', 'no-such-conversation']);
    expect(missing.code).toBe(3);
    expect(missing.stderr).toMatch(/NotFound/);
    const wrongToken = await bedrock(['ls'], { BEDROCK_TOKEN: 'nope' });
    expect(wrongToken.code).toBe(3);
    expect(wrongToken.stderr).toMatch(/Unauthenticated: .*the token in BEDROCK_TOKEN was refused/);
    // No token at all: the line says where it looked.
    const noToken = await bedrock(['ls'], { BEDROCK_TOKEN: undefined, BEDROCK_DATA_DIR: '/nonexistent/data' });
    expect(noToken.code).toBe(3);
    expect(noToken.stderr).toContain('no token: BEDROCK_TOKEN is not set and /nonexistent/data/token does not exist');
    const down = await bedrockBin(['ls'], { BEDROCK_URL: 'http://127.0.0.1:9' });
    expect(down.code).toBe(4);
    // In the user's words, naming the address (not a service's internal name).
    expect(down.stderr).toContain('cannot reach the Bedrock server at http://127.0.0.1:9');
    expect(down.stderr).not.toContain('web-bff');
  }, 60_000);

  it('chat streams turns, asks y/n on an upgrade request and quits on end of input', async () => {
    const child = spawn(BIN, ['chat', '--cwd', '/tmp'], {
      env: { PATH: process.env.PATH, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    await s.waitFor('prompt', () => err.includes('> '), 20_000);
    child.stdin.write('hello\n');
    await s.waitFor('streamed answer', () => out.includes('Hello!'), 20_000);
    child.stdin.write('write\n');
    await s.waitFor('upgrade question', () => /Allow the agent to write in .+ \(to fix the bug\)\? \[y\/N\]/.test(err), 20_000);
    child.stdin.write('y\n');
    // The turn goes on after the answer (the agent gets the upgrade's result) until it rests.
    await s.waitFor('turn after approval', () => /\[y\/N\] [\s\S]*mode: unrestricted[\s\S]*· idle/.test(err), 20_000);
    child.stdin.end();
    expect(await exited).toBe(0);
  }, 60_000);

  it("uses the embedded default's local token when BEDROCK_TOKEN is unset", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'bedrock-cli-'));
    writeFileSync(join(dir, 'token'), `${s.tokens.bob}\n`);
    const created = await bedrockBin(['new', '--cwd', '/tmp'], { BEDROCK_TOKEN: undefined, BEDROCK_DATA_DIR: dir });
    expect(created.code).toBe(0);
    // It is bob's: alice does not see it.
    expect((await bedrock(['show', created.stdout.trim()])).code).toBe(3);
    expect((await bedrock(['show', created.stdout.trim()], { BEDROCK_TOKEN: s.tokens.bob })).code).toBe(0);
  }, 60_000);
});
