/**
 * Conversations people can find, from the CLI, against the real web-bff and conversation
 * service (the test plays the gateway): `ls` shows titles and `--search` finds them, `show`
 * names the title and lists sub-agents with their ids, `rename` sets a title (and a bad one is
 * refused with the server's reason).
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { StopReason } from '@bedrock/contracts';
import { startSystem, type System } from '@bedrock/web-bff/test-support';
import { run } from '../src/run.ts';

const BIN = resolve('node_modules/.bin/bedrock');

let s: System;
beforeAll(async () => {
  s = await startSystem({ label: 'cli_titles' });
});
afterAll(async () => {
  await s?.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs the CLI in this process (the same `run` the bin calls) as `user`, capturing its output. */
async function bedrock(args: string[], user: 'alice' | 'bob' = 'alice'): Promise<Run> {
  let stdout = '';
  let stderr = '';
  const code = await run(
    args,
    { BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens[user], HOME: '/nonexistent', BEDROCK_RETRY_FOR: '0' },
    { out: (t) => void (stdout += t), err: (t) => void (stderr += t) },
  );
  return { code, stdout, stderr };
}

/** The real `bedrock` bin of the workspace, as a separate process. */
function bedrockBin(args: string[]): Promise<Run> {
  return new Promise((done) => {
    execFile(
      BIN,
      args,
      {
        env: { PATH: process.env.PATH, HOME: process.env.HOME, BEDROCK_URL: s.bff.httpUrl, BEDROCK_TOKEN: s.tokens.alice },
        timeout: 30_000,
      },
      (err, stdout, stderr) => done({ code: err ? (typeof err.code === 'number' ? err.code : -1) : 0, stdout, stderr }),
    );
  });
}

async function newConversation(): Promise<string> {
  const created = await bedrock(['new', '--cwd', '/tmp']);
  expect(created.code).toBe(0);
  return created.stdout.trim();
}

describe('titles in the CLI', () => {
  it('ls shows the title from the first message; rename replaces it for good; --search finds titles ignoring case', async () => {
    const first = await newConversation();
    const second = await newConversation();
    const untitled = await newConversation();
    expect((await bedrock(['send', first, '# Speed up the **CI** pipeline\nit takes 20 minutes'])).code).toBe(0);
    expect((await bedrock(['send', second, 'look at flaky tests'])).code).toBe(0);

    const ls = await bedrock(['ls']);
    expect(ls.code).toBe(0);
    expect(ls.stdout).toMatch(new RegExp(`^${first}  .*  Speed up the CI pipeline {2,}/tmp$`, 'm'));
    expect(ls.stdout).toMatch(new RegExp(`^${untitled}  .*  \\(no title yet\\) {2,}/tmp$`, 'm'));

    const renamed = await bedrockBin(['rename', second, '  Flaky test hunt (CI)  ']);
    expect(renamed).toMatchObject({ code: 0, stdout: 'Flaky test hunt (CI)\n' });
    // The rename replaced the title its first message gave it.
    const found = await bedrock(['ls', '--search', 'ci']);
    expect(
      found.stdout
        .trim()
        .split('\n')
        .slice(1)
        .map((l) => l.split('  ')[0]),
    ).toEqual([second, first]);
    expect(found.stdout).toContain('Flaky test hunt (CI)');
    // The header and one conversation.
    expect((await bedrock(['ls', '--search', 'PIPELINE'])).stdout.trim().split('\n')).toHaveLength(2);
    expect((await bedrock(['ls', '--search', 'nothing of the sort'])).stdout).toBe('');
    // Another user finds none of it.
    expect((await bedrock(['ls', '--search', 'ci'], 'bob')).stdout).toBe('');
    const json = await bedrock(['ls', '--search', 'flaky', '--json']);
    expect(JSON.parse(json.stdout.trim())).toMatchObject({ id: second, title: 'Flaky test hunt (CI)' });

    const shown = await bedrock(['show', second]);
    expect(shown.stdout.split('\n')[0]).toBe('Flaky test hunt (CI)');
  });

  it('rename refuses a bad title with the server’s reason, and another user’s conversation is not found', async () => {
    const id = await newConversation();
    const empty = await bedrock(['rename', id, '   ']);
    expect(empty.code).toBe(3);
    expect(empty.stderr).toContain('title is empty: give 1 to 200 characters');
    const long = await bedrock(['rename', id, 'x'.repeat(201)]);
    expect(long.code).toBe(3);
    expect(long.stderr).toContain('title is 201 characters; the limit is 200: shorten it');
    const foreign = await bedrock(['rename', id, 'mine'], 'bob');
    expect(foreign.code).not.toBe(0);
    expect(foreign.stderr).toContain(`conversation ${id} not found`);
    expect(await bedrock(['rename', id])).toMatchObject({ code: 2 });
    expect(await bedrock(['show', id, '--search', 'x'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--search applies to ls'),
    });
  });

  it('show lists the sub-agents with their ids and titles; each opens with show and names its parent', async () => {
    const id = await newConversation();
    await bedrock(['send', id, 'split the work']);
    const job = await s.waitFor('the LLM job', () => s.llmJobs.find((j) => j.conversationId === id));
    await s.send(id, `r/${job.requestId}`, {
      case: 'llmResponse',
      value: {
        requestId: job.requestId,
        stopReason: StopReason.TOOL_USE,
        content: [
          {
            block: {
              case: 'toolUse',
              value: {
                id: 'sp',
                name: 'spawn_agents',
                inputJson: JSON.stringify({ tasks: [{ task: 'Read the Makefile' }, { task: 'List the test suites' }] }),
              },
            },
          },
        ],
      },
    });
    const children = [`${id}--sp--0`, `${id}--sp--1`];
    // (The transcript names them too, in the spawn call's result: wait for the list.)
    const shown = await s.waitFor('both sub-agents in show', async () => {
      const out = (await bedrock(['show', id])).stdout;
      return children.every((c) => new RegExp(`^  ${c}  `, 'm').test(out)) ? out : undefined;
    });
    expect(shown).toContain('sub-agents (bedrock show ID opens one):\n');
    expect(shown).toMatch(new RegExp(`^  ${children[0]}  .* Read the Makefile$`, 'm'));
    expect(shown).toMatch(new RegExp(`^  ${children[1]}  .* List the test suites$`, 'm'));

    const child = await bedrock(['show', children[1]!]);
    expect(child.code).toBe(0);
    expect(child.stdout.split('\n')[0]).toBe('List the test suites');
    expect(child.stdout).toContain(`sub-agent of ${id} (bedrock show ${id})\n`);
    // Not in the list of conversations; under their parent.
    expect((await bedrock(['ls'])).stdout).not.toContain(children[0]);
    expect((await bedrock(['ls', '--parent', id])).stdout).toContain('Read the Makefile');
  });
});
