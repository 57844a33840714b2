/**
 * The `bedrock` CLI as people use it in a terminal and in scripts, each command the workspace's bin in
 * its own process against the embedded product in this process (a real tool-runner running bash, the
 * offline demo model): closed pipes, folded tool output, messages from stdin and files, multi-line chat,
 * a pending approval, watch resuming and giving up, Ctrl-C, --cwd and --from, states, mode and colour.
 * docs/cli.md.
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';
import { startSwitchProxy, type SwitchProxy } from '@bedrock/testkit/switch-proxy';

const BIN = resolve('node_modules/.bin/bedrock');

let bedrock: RunningEmbedded;
let work: string;
const dirs: string[] = [];

beforeAll(async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-cli-data-'));
  work = mkdtempSync(join(tmpdir(), 'bedrock-cli-work-'));
  // Tools run as an unprivileged user (nobody for a root-owned directory): it must read it.
  chmodSync(work, 0o755);
  dirs.push(dataDir, work);
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
    },
  });
}, 60_000);
afterAll(async () => {
  await bedrock?.stop();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

interface Run {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

interface Started {
  child: ChildProcessWithoutNullStreams;
  readonly stdout: () => string;
  readonly stderr: () => string;
  readonly exited: Promise<Run>;
}

function env(more: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  return { PATH: process.env.PATH, HOME: work, BEDROCK_URL: bedrock.httpUrl, BEDROCK_TOKEN: bedrock.token, ...more };
}

/** Starts the bin (or `bash -c SCRIPT` with `$BIN` set) as its own process. */
function start(args: string[], options: { env?: Record<string, string | undefined>; cwd?: string; bash?: boolean } = {}): Started {
  const child = options.bash
    ? spawn('bash', ['-c', args.join(' ')], { env: { ...env(options.env), BIN }, cwd: options.cwd ?? work })
    : spawn(BIN, args, { env: env(options.env), cwd: options.cwd ?? work });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<Run>((done) => child.once('close', (code, signal) => done({ code, signal, stdout, stderr })));
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

async function bedrockCli(args: string[], options: { env?: Record<string, string | undefined>; cwd?: string; input?: string } = {}) {
  const s = start(args, options);
  if (options.input !== undefined) s.child.stdin.end(options.input);
  else s.child.stdin.end();
  return s.exited;
}

async function waitFor(what: string, probe: () => boolean, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function newConversation(cwd = work): Promise<string> {
  const created = await bedrockCli(['new', '--cwd', cwd]);
  expect(created.code).toBe(0);
  return created.stdout.trim();
}

const STACK = /EPIPE|Error:|\n\s+at /;

describe('output for people', () => {
  it('folds long tool output (head, count, tail) and prints it once; --full shows it all; · idle is said once', async () => {
    const id = await newConversation();
    const seq = await bedrockCli(['send', id, '$ seq 1 100000', '--wait']);
    expect(seq.code).toBe(0);
    expect(seq.stdout).toContain(
      ['⏺ bash {"command":"seq 1 100000"}', ...Array.from({ length: 9 }, (_, i) => `    ${i + 1}`)].join('\n') +
        '\n' +
        [
          '    10',
          '    … 99985 lines hidden (--full shows them) …',
          '    99996',
          '    99997',
          '    99998',
          '    99999',
          '    100000',
          '  → ok',
        ].join('\n'),
    );
    // Printed once: not streamed to stderr as well, not squashed into the result line again.
    expect(seq.stdout.match(/^ {4}\d+$/gm)).toHaveLength(15);
    expect(seq.stderr).not.toMatch(/^\d+$/m);
    expect(seq.stdout).not.toMatch(/→ ok: 1 2 3/);
    expect(seq.stderr.match(/· idle/g)).toHaveLength(1);

    const full = await bedrockCli(['send', id, '$ seq 1 40', '--wait', '--full']);
    expect(full.stdout.match(/^ {4}\d+$/gm)).toEqual(Array.from({ length: 40 }, (_, i) => `    ${i + 1}`));
    // What a result adds to the output (the exit code) is said on its status line.
    const failed = await bedrockCli(['send', id, '$ echo hi; exit 3', '--wait']);
    expect(failed.stdout).toContain('    hi\n  → error: [Exit code 3.]\n');

    const shown = await bedrockCli(['show', id]);
    expect(shown.stdout).toMatch(/^ {4}… \d+ lines hidden \(--full shows them\) …$/m);
    const shownFull = await bedrockCli(['show', id, '--full']);
    expect(shownFull.stdout).toContain(Array.from({ length: 40 }, (_, i) => `    ${i + 1}`).join('\n'));
  }, 90_000);

  it('says states in words, shows the mode, and colours only a terminal without NO_COLOR', async () => {
    const id = await newConversation();
    const upgrade = await bedrockCli(['send', id, '/upgrade to fix the bug', '--wait']);
    expect(upgrade.code).toBe(5);
    expect(upgrade.stderr).toContain('· waiting for approval: the agent asks for write access (to fix the bug)');
    const shown = await bedrockCli(['show', id]);
    expect(shown.stdout).toMatch(/^state: waiting for approval/m);
    expect(shown.stdout).toMatch(
      /^mode: (restricted \(read-only, sandboxed(\)|; Unrestricted would write in .*\))|unrestricted only .*)$/m,
    );
    const ls = await bedrockCli(['ls']);
    expect(ls.stdout).toMatch(new RegExp(`^${id}  waiting for approval `, 'm'));
    expect(`${shown.stdout}${ls.stdout}${upgrade.stderr}`).not.toMatch(/awaiting/i);
    expect(`${shown.stdout}${upgrade.stdout}`).not.toContain('\x1b[');
    await bedrockCli(['deny', id]);

    // On a terminal (script(1) gives the command one): colour, unless NO_COLOR is set.
    const other = await newConversation();
    const tty = start([`script -qec "$BIN send ${other} '\\$ echo hi' --wait" /dev/null`], { bash: true });
    tty.child.stdin.end();
    const coloured = await tty.exited;
    expect(coloured.stdout).toContain('\x1b[32mok\x1b[39m');
    const plain = start([`script -qec "$BIN send ${other} '\\$ echo hi' --wait" /dev/null`], { bash: true, env: { NO_COLOR: '1' } });
    plain.child.stdin.end();
    const uncoloured = await plain.exited;
    expect(uncoloured.stdout).toContain('→ ok');
    expect(uncoloured.stdout).not.toContain('\x1b[');
  }, 90_000);
});

describe('pipes and input', () => {
  it('ends quietly when the reader of its output goes away (ls | head -1, show | head -1)', async () => {
    const id = await newConversation();
    expect((await bedrockCli(['send', id, '$ seq 1 30000', '--wait'])).code).toBe(0);
    for (const line of [
      '"$BIN" ls | head -1; echo "status ${PIPESTATUS[0]}" >&2',
      `"$BIN" show ${id} --full | head -1; echo "status \${PIPESTATUS[0]}" >&2`,
      // The reader is gone before the first write.
      `"$BIN" show ${id} | true; echo "status \${PIPESTATUS[0]}" >&2`,
    ]) {
      const s = start([line], { bash: true });
      s.child.stdin.end();
      const r = await s.exited;
      expect(r.stderr).not.toMatch(STACK);
      expect(r.stderr).toMatch(/^status (0|141)$/m);
    }
  }, 90_000);

  it('sends a message from stdin (send ID -, longer than an argument may be) or from a file (--file)', async () => {
    const id = await newConversation();
    // Linux refuses a single argument over 128 KiB ("Argument list too long").
    const long = `${'x'.repeat(150_000)}\nsecond line`;
    const sent = await bedrockCli(['send', id, '-'], { input: `${long}\n` });
    expect(sent.code).toBe(0);
    expect(sent.stdout).toMatch(/^\S+\n$/);
    const doc = JSON.parse((await bedrockCli(['show', id, '--json'])).stdout) as { messages: { content: { text?: { text: string } }[] }[] };
    expect(doc.messages.some((m) => m.content.some((b) => b.text?.text === long))).toBe(true);

    const file = join(work, 'message.txt');
    writeFileSync(file, '$ echo from-the-file\n');
    const other = await newConversation();
    const fromFile = await bedrockCli(['send', other, '--file', file, '--wait']);
    expect(fromFile.code).toBe(0);
    expect(fromFile.stdout).toContain('    from-the-file\n');
    expect((await bedrockCli(['send', other, 'text', '--file', file])).code).toBe(2);
    const missing = await bedrockCli(['send', other, '--file', join(work, 'nope.txt')]);
    expect([missing.code, missing.stderr]).toEqual([2, expect.stringMatching(/--file .*nope\.txt: cannot read the file/)]);
    expect((await bedrockCli(['send', other, '-'], { input: '\n' })).code).toBe(2);
  }, 90_000);
});

describe('chat', () => {
  it('answers an approval that was pending when it opens, then takes a message of several lines (\\ goes on)', async () => {
    const id = await newConversation();
    expect((await bedrockCli(['send', id, '/upgrade to fix the bug', '--wait'])).code).toBe(5);
    const chat = start(['chat', id]);
    await waitFor('the approval question', () =>
      /Allow the agent to write in \S+ as nobody \(uid 65534\) \(to fix the bug\)\? \[y\/N\] $/.test(chat.stderr()),
    );
    chat.child.stdin.write('y\n');
    await waitFor('the turn after the approval', () => /mode: unrestricted[\s\S]*· idle\n> $/.test(chat.stderr()));
    chat.child.stdin.write('$ echo one \\\n');
    await waitFor('the continuation prompt', () => chat.stderr().endsWith('. '));
    chat.child.stdin.write('$ echo two\n');
    await waitFor('both commands of the one message', () => chat.stdout().includes('    two\n'));
    await waitFor('the prompt again', () => chat.stderr().endsWith('> '));
    chat.child.stdin.end();
    expect((await chat.exited).code).toBe(0);
    expect(chat.stdout()).toContain('    one\n');
    const doc = JSON.parse((await bedrockCli(['show', id, '--json'])).stdout) as { messages: { content: { text?: { text: string } }[] }[] };
    expect(doc.messages.flatMap((m) => m.content.map((b) => b.text?.text))).toContain('$ echo one \n$ echo two');
  }, 90_000);
});

describe('Ctrl-C', () => {
  it('exits 130 in send --wait (saying the tool still runs), watch and chat', async () => {
    const id = await newConversation();
    const waiting = start(['send', id, '$ sleep 30', '--wait']);
    await waitFor('the tool to run', () => waiting.stderr().includes('running tool 1 of 1: bash'));
    waiting.child.kill('SIGINT');
    const interrupted = await waiting.exited;
    expect(interrupted.code).toBe(130);
    expect(interrupted.stderr).toMatch(
      new RegExp(`bedrock: interrupted; the tool bash is still running in conversation ${id} \\(\`bedrock cancel ${id}\` stops it\\)`),
    );
    expect((await bedrockCli(['cancel', id])).code).toBe(0);

    const watching = start(['watch', id]);
    await waitFor('the watch', () => watching.stderr().includes('watching'));
    watching.child.kill('SIGINT');
    expect((await watching.exited).code).toBe(130);

    const chat = start(['chat', id]);
    await waitFor('the prompt', () => chat.stderr().endsWith('> '));
    chat.child.kill('SIGINT');
    const quit = await chat.exited;
    expect(quit.code).toBe(130);
    expect(quit.stderr).not.toMatch(STACK);
  }, 90_000);
});

describe('watch', () => {
  let proxy: SwitchProxy;
  beforeAll(async () => {
    proxy = await startSwitchProxy(Number(new URL(bedrock.httpUrl).port));
  });
  afterAll(async () => proxy?.close());

  it('resumes after a disconnect from the last event seen, and exits 4 saying so when the server stays away', async () => {
    const id = await newConversation();
    const watching = start(['watch', id], { env: { BEDROCK_URL: `http://127.0.0.1:${proxy.port}`, BEDROCK_RETRY_FOR: '4s' } });
    await waitFor('the watch', () => watching.stderr().includes('watching'));
    proxy.down();
    await waitFor('the disconnect', () => watching.stderr().includes('· disconnected'));
    // Sent while the watch is cut off: it arrives after the watch resumes.
    expect((await bedrockCli(['send', id, '$ echo while-away'])).code).toBe(0);
    proxy.up();
    await waitFor('the missed turn', () => watching.stdout().includes('    while-away\n'), 30_000);
    expect(watching.stderr()).toContain('· resumed');
    await waitFor('idle', () => /· idle\n$/.test(watching.stderr()));

    proxy.down();
    const gone = await watching.exited;
    proxy.up();
    expect(gone.code).toBe(4);
    expect(gone.stderr).toMatch(/^bedrock: (Unavailable|Aborted): .*gave up resuming the watch after \d+ attempts over \d+\.\ds/m);
  }, 90_000);
});

describe('new', () => {
  it('refuses a --cwd that does not exist; --from keeps the source directory unless --cwd is given', async () => {
    const missing = await bedrockCli(['new', '--cwd', '/nonexistent/dir']);
    expect([missing.code, missing.stdout, missing.stderr]).toEqual([2, '', 'bedrock: --cwd /nonexistent/dir: no such directory\n']);
    expect((await bedrockCli(['chat', '--cwd', '/nonexistent/dir'])).code).toBe(2);

    const project = mkdtempSync(join(tmpdir(), 'bedrock-cli-project-'));
    chmodSync(project, 0o755);
    dirs.push(project);
    const source = await newConversation(project);
    // The offline model reports a nearly full context: the conversation is continued, then exhausted.
    expect((await bedrockCli(['send', source, '/usage 195000', '--wait'])).code).toBe(6);
    const next = await bedrockCli(['new', '--from', source, '--json'], { cwd: '/' });
    expect(next.code).toBe(0);
    expect(JSON.parse(next.stdout)).toMatchObject({ cwd: project, continuedFromId: source });
    const elsewhere = await bedrockCli(['new', '--from', source, '--cwd', work, '--json']);
    expect(JSON.parse(elsewhere.stdout)).toMatchObject({ cwd: work });
  }, 90_000);
});
