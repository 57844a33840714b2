/**
 * `bedrock acp` driven as an editor drives it, by an ACP client of the SDK (@agentclientprotocol/sdk):
 * the bin in its own process on stdio, against the embedded product in this process (real tool-runner,
 * offline model). Turns with tools and thinking, cancels, steering, permission requests, diffs, loading
 * and listing sessions, errors; every line the agent writes is checked against the protocol's schema
 * (check()).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { Readable, Transform, Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { afterAll, afterEach, beforeAll, describe, expect, it } from '@jest/globals';
import * as acp from '@agentclientprotocol/sdk';
import { startEmbedded, type RunningEmbedded } from '@bedrock/embedded';

const BIN = resolve('node_modules/.bin/bedrock');

interface Schema {
  safeParse(value: unknown): { success: true; data: unknown } | { success: false; error: { message: string } };
}
/** The SDK's zod types of the protocol (generated from its JSON schema). */
let zod: Record<string, Schema>;

let bedrock: RunningEmbedded;
let work: string;
const dirs: string[] = [];

beforeAll(async () => {
  const sdk = createRequire(import.meta.url).resolve('@agentclientprotocol/sdk');
  zod = (await import(pathToFileURL(join(dirname(sdk), '..', 'schema', 'zod.gen.js')).href)) as Record<string, Schema>;
  const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-acp-data-'));
  work = mkdtempSync(join(tmpdir(), 'bedrock-acp-work-'));
  // Tools run as an unprivileged user: it must read the directory, and write it for the edit.
  chmodSync(work, 0o777);
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

/** What the agent wrote that the schema refuses, over every agent of the test. */
const violations: string[] = [];
const running: Agent[] = [];
afterEach(async () => {
  for (const a of running.splice(0)) await a.close();
  expect(violations.splice(0)).toEqual([]);
});

/** The result type of each method a client calls. */
const RESULTS: Record<string, string> = {
  initialize: 'zInitializeResponse',
  'session/new': 'zNewSessionResponse',
  'session/load': 'zLoadSessionResponse',
  'session/list': 'zListSessionsResponse',
  'session/set_mode': 'zSetSessionModeResponse',
  'session/prompt': 'zPromptResponse',
};
/** The params type of each request or notification the agent sends. */
const SENT: Record<string, string> = {
  'session/update': 'zSessionNotification',
  'session/request_permission': 'zRequestPermissionRequest',
};

/** JSON as it goes over the wire (no undefined fields), to compare with what the schema kept. */
const wire = (v: unknown) => JSON.parse(JSON.stringify(v)) as unknown;

/** The paths of `sent` that `parsed` lacks or holds otherwise (what the schema dropped or changed; its defaults may add fields). */
function dropped(sent: unknown, parsed: unknown, path = ''): string[] {
  if (sent && typeof sent === 'object' && parsed && typeof parsed === 'object') {
    if (Array.isArray(sent) !== Array.isArray(parsed)) return [path || '.'];
    return Object.entries(sent).flatMap(([k, v]) =>
      k in parsed ? dropped(v, (parsed as Record<string, unknown>)[k], `${path}.${k}`) : [`${path}.${k}`],
    );
  }
  return isDeepStrictEqual(sent, parsed) ? [] : [path || '.'];
}

/**
 * Checks one line the agent wrote: JSON-RPC 2.0, and its payload against the type the
 * protocol gives it (a response by the method of the request it answers). A field the
 * schema does not know is a violation too (zod drops it: the parse differs from the line).
 */
function check(line: string, methodOf: Map<string, string>): void {
  let msg: Record<string, unknown>;
  try {
    msg = JSON.parse(line) as Record<string, unknown>;
  } catch {
    violations.push(`not JSON: ${line.slice(0, 200)}`);
    return;
  }
  const fail = (why: string): void => void violations.push(`${why}: ${line.slice(0, 300)}`);
  if (msg.jsonrpc !== '2.0') return fail('not JSON-RPC 2.0');
  const validate = (type: string | undefined, value: unknown, what: string) => {
    if (!type) return fail(`no schema for ${what}`);
    const parsed = zod[type]!.safeParse(value);
    if (!parsed.success) return fail(`${what} is not a ${type} (${parsed.error.message})`);
    const unknown = dropped(wire(value), wire(parsed.data));
    if (unknown.length) fail(`${what}: ${type} does not define ${unknown.join(', ')}`);
  };
  if ('method' in msg) {
    validate(SENT[msg.method as string], msg.params, `${String(msg.method)}`);
  } else if ('error' in msg) {
    validate('zError', msg.error, `the error answering ${String(msg.id)}`);
  } else {
    const method = methodOf.get(JSON.stringify(msg.id));
    validate(method && RESULTS[method], msg.result, `the result of ${method ?? `unknown request ${String(msg.id)}`}`);
  }
}

/** Splits a byte stream into lines for `onLine`, passing the bytes on unchanged. */
function tap(onLine: (line: string) => void): Transform {
  let partial = '';
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const l of lines) if (l.trim()) onLine(l);
      done(null, chunk);
    },
  });
}

interface Agent {
  readonly child: ChildProcessWithoutNullStreams;
  readonly agent: acp.ClientContext;
  /** session/update notifications received, in order. */
  readonly updates: acp.SessionNotification[];
  /** Permission requests received, in order. */
  readonly asked: acp.RequestPermissionRequest[];
  /** How the client answers a permission request (default: allow once). */
  answer: (req: acp.RequestPermissionRequest) => acp.RequestPermissionResponse;
  stderr(): string;
  close(): Promise<number | null>;
}

/** Starts `bedrock acp` and connects an ACP client of the SDK to it. */
function startAgent(): Agent {
  const child = spawn(BIN, ['acp'], {
    env: { PATH: process.env.PATH, HOME: work, BEDROCK_URL: bedrock.httpUrl, BEDROCK_TOKEN: bedrock.token },
    cwd: work,
  });
  let stderr = '';
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((done) => child.once('close', (code) => done(code)));
  const methodOf = new Map<string, string>();
  const toAgent = tap((line) => {
    const m = JSON.parse(line) as { id?: unknown; method?: string };
    if (m.method && m.id !== undefined) methodOf.set(JSON.stringify(m.id), m.method);
  });
  toAgent.pipe(child.stdin);
  const fromAgent = child.stdout.pipe(tap((line) => check(line, methodOf)));
  const self: Agent = {
    child,
    updates: [],
    asked: [],
    answer: (req) => ({ outcome: { outcome: 'selected', optionId: req.options.find((o) => o.kind === 'allow_once')!.optionId } }),
    stderr: () => stderr,
    agent: undefined as unknown as acp.ClientContext,
    close: async () => {
      toAgent.end();
      return exited;
    },
  };
  const app = acp
    .client({ name: 'acp-test' })
    .onNotification(acp.methods.client.session.update, ({ params }) => {
      self.updates.push(params);
    })
    .onRequest(acp.methods.client.session.requestPermission, ({ params }) => {
      self.asked.push(params);
      return self.answer(params);
    });
  const connection = app.connect(
    acp.ndJsonStream(Writable.toWeb(toAgent) as WritableStream<Uint8Array>, Readable.toWeb(fromAgent) as ReadableStream<Uint8Array>),
  );
  (self as { agent: acp.ClientContext }).agent = connection.agent;
  running.push(self);
  return self;
}

async function initialized(): Promise<Agent> {
  const a = startAgent();
  await a.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
  return a;
}

async function waitFor(what: string, probe: () => boolean, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

type Update<K extends acp.SessionUpdate['sessionUpdate']> = Extract<acp.SessionUpdate, { sessionUpdate: K }>;

function updatesOf<K extends acp.SessionUpdate['sessionUpdate']>(a: Agent, sessionId: string, kind: K, from = 0): Update<K>[] {
  return a.updates
    .slice(from)
    .filter((n) => n.sessionId === sessionId && n.update.sessionUpdate === kind)
    .map((n) => n.update as Update<K>);
}

/** The text of the agent's message chunks (or the user's) since `from`. */
function textOf(a: Agent, sessionId: string, kind: 'agent_message_chunk' | 'user_message_chunk', from = 0): string {
  return updatesOf(a, sessionId, kind, from)
    .map((u) => (u.content.type === 'text' ? u.content.text : ''))
    .join('');
}

function contentText(u: Update<'tool_call_update'>): string {
  return (u.content ?? []).map((c) => (c.type === 'content' && c.content.type === 'text' ? c.content.text : '')).join('');
}

const prompt = (a: Agent, sessionId: string, text: string) =>
  a.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'text', text }] });

describe('bedrock acp', () => {
  it('initializes with its capabilities, creates a session in a directory and runs a turn with a tool', async () => {
    const a = startAgent();
    const init = await a.agent.request(acp.methods.agent.initialize, { protocolVersion: acp.PROTOCOL_VERSION, clientCapabilities: {} });
    expect(init).toMatchObject({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        promptCapabilities: { image: true, audio: false },
        mcpCapabilities: { http: false, sse: false },
        sessionCapabilities: { list: {} },
      },
      agentInfo: { name: 'bedrock' },
    });
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    expect(sessionId).toMatch(/\S/);

    const res = await prompt(a, sessionId, '$ echo hello-from-acp');
    expect(res.stopReason).toBe('end_turn');
    const calls = updatesOf(a, sessionId, 'tool_call');
    expect(calls).toEqual([
      expect.objectContaining({
        title: '$ echo hello-from-acp',
        kind: 'execute',
        status: 'pending',
        rawInput: { command: 'echo hello-from-acp' },
      }),
    ]);
    const id = calls[0]!.toolCallId;
    const updates = updatesOf(a, sessionId, 'tool_call_update').filter((u) => u.toolCallId === id);
    expect(updates.map((u) => u.status)).toContain('in_progress');
    const done = updates.at(-1)!;
    expect(done.status).toBe('completed');
    expect(contentText(done)).toContain('hello-from-acp');
    // The tool call, its result, then the answer that sums it up: in that order.
    const kinds = a.updates.map((n) => n.update.sessionUpdate);
    const lastText = kinds.lastIndexOf('agent_message_chunk');
    expect(kinds.indexOf('tool_call')).toBeLessThan(a.updates.indexOf(a.updates.find((n) => n.update === done)!));
    expect(a.updates.indexOf(a.updates.find((n) => n.update === done)!)).toBeLessThan(lastText);
    expect(textOf(a, sessionId, 'agent_message_chunk')).toContain('hello-from-acp');
    // Live, the editor's own prompt is not echoed back.
    expect(updatesOf(a, sessionId, 'user_message_chunk')).toEqual([]);
    expect(await a.close()).toBe(0);
  }, 60_000);

  it('streams thinking as thought chunks before the answer', async () => {
    const a = await initialized();
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    const res = await prompt(a, sessionId, '/think-long how the cache is laid out');
    expect(res.stopReason).toBe('end_turn');
    const thoughts = updatesOf(a, sessionId, 'agent_thought_chunk');
    // With thinking on (the deployment's default here) a long block; with it off, the answer says so.
    if (thoughts.length > 0) {
      const first = a.updates.findIndex((n) => n.update.sessionUpdate === 'agent_thought_chunk');
      const answer = a.updates.findIndex((n) => n.update.sessionUpdate === 'agent_message_chunk');
      expect(first).toBeLessThan(answer);
    } else {
      expect(textOf(a, sessionId, 'agent_message_chunk')).toMatch(/thinking is off/i);
    }
  }, 60_000);

  it('cancels a turn: the prompt ends with cancelled and the running tool fails', async () => {
    const a = await initialized();
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    const turn = prompt(a, sessionId, '$ echo started-here; sleep 30');
    await waitFor('the tool to run', () => updatesOf(a, sessionId, 'tool_call_update').some((u) => u.status === 'in_progress'));
    await waitFor('its first output', () =>
      updatesOf(a, sessionId, 'tool_call_update').some((u) => contentText(u).includes('started-here')),
    );
    const started = Date.now();
    await a.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    expect((await turn).stopReason).toBe('cancelled');
    expect(Date.now() - started).toBeLessThan(15_000);
    const id = updatesOf(a, sessionId, 'tool_call')[0]!.toolCallId;
    const last = updatesOf(a, sessionId, 'tool_call_update')
      .filter((u) => u.toolCallId === id)
      .at(-1)!;
    expect(last.status).toBe('failed');
    // What it printed before the cancel stays with it (issue 28).
    expect(contentText(last)).toMatch(/started-here\s+Cancelled by user/);
    // The session goes on after a cancel.
    expect((await prompt(a, sessionId, '$ echo after-cancel')).stopReason).toBe('end_turn');
  }, 60_000);

  it('steers: a prompt sent during a turn joins it at the next tool boundary, and both prompts end when it rests', async () => {
    const a = await initialized();
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    let firstEndedAt = -1;
    const first = prompt(a, sessionId, '$ sleep 2').then((r) => ((firstEndedAt = a.updates.length), r));
    await waitFor('the tool to run', () => updatesOf(a, sessionId, 'tool_call_update').some((u) => u.status === 'in_progress'));
    const second = await prompt(a, sessionId, '$ echo steered-in');
    expect(second.stopReason).toBe('end_turn');
    expect((await first).stopReason).toBe('end_turn');
    const calls = updatesOf(a, sessionId, 'tool_call');
    expect(calls.map((c) => c.title)).toEqual(['$ sleep 2', '$ echo steered-in']);
    const at = (id: string, status: string) =>
      a.updates.findIndex((n) => n.update.sessionUpdate === 'tool_call_update' && n.update.toolCallId === id && n.update.status === status);
    // The model read the steer after the sleep's result, in the same turn, which the first prompt followed to its end.
    const slept = at(calls[0]!.toolCallId, 'completed');
    const steered = at(calls[1]!.toolCallId, 'completed');
    expect(slept).toBeGreaterThan(-1);
    expect(steered).toBeGreaterThan(slept);
    expect(firstEndedAt).toBeGreaterThan(steered);
    expect(contentText(a.updates[steered]!.update as Update<'tool_call_update'>)).toContain('steered-in');
  }, 60_000);

  it('cancels a turn with a steer waiting: the waiting prompt is withdrawn and both prompts end cancelled', async () => {
    const a = await initialized();
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    const first = prompt(a, sessionId, '$ sleep 30');
    await waitFor('the tool to run', () => updatesOf(a, sessionId, 'tool_call_update').some((u) => u.status === 'in_progress'));
    const second = prompt(a, sessionId, '$ echo never-run');
    // The steer is stored (it waits in the conversation) before the cancel comes.
    await new Promise((r) => setTimeout(r, 500));
    await a.agent.notify(acp.methods.agent.session.cancel, { sessionId });
    expect((await first).stopReason).toBe('cancelled');
    expect((await second).stopReason).toBe('cancelled');
    expect(updatesOf(a, sessionId, 'tool_call').map((c) => c.title)).toEqual(['$ sleep 30']);
    // At rest, nothing waiting: the next prompt is a turn of its own.
    const from = a.updates.length;
    expect((await prompt(a, sessionId, '$ echo next')).stopReason).toBe('end_turn');
    expect(updatesOf(a, sessionId, 'tool_call', from).map((c) => c.title)).toEqual(['$ echo next']);
  }, 60_000);

  it('asks the editor for write access (allowed once: the turn goes on), then shows an edit as a diff', async () => {
    const a = await initialized();
    const cwd = join(work, 'edits');
    mkdirSync(cwd);
    chmodSync(cwd, 0o777);
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd, mcpServers: [] });
    // Restricted, as every new conversation: the patch tool is refused.
    const refused = await prompt(a, sessionId, '/write notes.txt\nnot yet');
    expect(refused.stopReason).toBe('end_turn');
    expect(updatesOf(a, sessionId, 'tool_call_update').at(-1)!.status).toBe('failed');

    const upgrade = await prompt(a, sessionId, '/upgrade to write the notes');
    expect(upgrade.stopReason).toBe('end_turn');
    expect(a.asked).toHaveLength(1);
    const ask = a.asked[0]!;
    const call = updatesOf(a, sessionId, 'tool_call').find((u) => u.kind === 'switch_mode')!;
    expect(ask).toMatchObject({ sessionId, toolCall: { toolCallId: call.toolCallId, kind: 'switch_mode' } });
    // Where and as whom it would write, as the tool-runner reported it (a directory nobody may write: no warning).
    expect(ask.toolCall.title).toBe(
      `The agent asks for write access in ${cwd} as nobody (uid 65534) (Unrestricted mode): to write the notes. Allow it?`,
    );
    // The session's mode follows: Unrestricted now, as a session mode.
    expect(updatesOf(a, sessionId, 'current_mode_update').at(-1)).toMatchObject({ currentModeId: 'unrestricted' });
    expect(ask.options.map((o) => o.kind).sort()).toEqual(['allow_once', 'reject_once']);
    expect(
      updatesOf(a, sessionId, 'tool_call_update').find((u) => u.toolCallId === call.toolCallId && u.status === 'completed'),
    ).toBeDefined();

    const from = a.updates.length;
    const edit = await prompt(a, sessionId, '/write notes.txt\nhello from the editor');
    expect(edit.stopReason).toBe('end_turn');
    const patch = updatesOf(a, sessionId, 'tool_call', from)[0]!;
    expect(patch).toMatchObject({ kind: 'edit', title: 'Edit notes.txt', locations: [{ path: join(cwd, 'notes.txt') }] });
    const result = updatesOf(a, sessionId, 'tool_call_update', from).find(
      (u) => u.toolCallId === patch.toolCallId && u.status !== 'in_progress',
    )!;
    expect(result.status).toBe('completed');
    expect(result.content).toEqual([{ type: 'diff', path: join(cwd, 'notes.txt'), oldText: null, newText: 'hello from the editor\n' }]);
    expect(readFileSync(join(cwd, 'notes.txt'), 'utf8')).toBe('hello from the editor\n');

    // A change to an existing file: the hunk's old and new text.
    const from2 = a.updates.length;
    expect((await prompt(a, sessionId, '/write notes.txt\nhello again')).stopReason).toBe('end_turn');
    const again = updatesOf(a, sessionId, 'tool_call_update', from2).find((u) => u.status === 'completed')!;
    expect(again.content).toEqual([
      { type: 'diff', path: join(cwd, 'notes.txt'), oldText: 'hello from the editor\n', newText: 'hello again\n' },
    ]);
  }, 90_000);

  it('keeps read-only when the editor rejects the request', async () => {
    const a = await initialized();
    a.answer = (req) => ({ outcome: { outcome: 'selected', optionId: req.options.find((o) => o.kind === 'reject_once')!.optionId } });
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    expect((await prompt(a, sessionId, '/upgrade to write')).stopReason).toBe('end_turn');
    expect(a.asked).toHaveLength(1);
    const call = updatesOf(a, sessionId, 'tool_call').find((u) => u.kind === 'switch_mode')!;
    const result = updatesOf(a, sessionId, 'tool_call_update')
      .filter((u) => u.toolCallId === call.toolCallId)
      .at(-1)!;
    // Refused, not done: the editor shows the request failed.
    expect(result.status).toBe('failed');
    expect(contentText(result)).toContain('The user denied the upgrade');
    expect(a.asked[0]!.toolCall.title).toMatch(
      /^The agent asks for write access in \S+ as nobody \(uid 65534\) \(Unrestricted mode\): to write\. Allow it\?/,
    );
    // Still read-only: an edit is refused.
    const from = a.updates.length;
    expect((await prompt(a, sessionId, '/write notes.txt\nno')).stopReason).toBe('end_turn');
    expect(updatesOf(a, sessionId, 'tool_call_update', from).at(-1)!.status).toBe('failed');
  }, 60_000);

  it('loads an existing session (its history replayed as updates) and lists sessions', async () => {
    const first = await initialized();
    const { sessionId } = await first.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    expect((await prompt(first, sessionId, '$ echo remembered')).stopReason).toBe('end_turn');
    const live = first.updates.filter((n) => n.update.sessionUpdate === 'tool_call');
    await first.close();

    // Another editor (or the same one, restarted) opens it.
    const a = await initialized();
    const listed = await a.agent.request(acp.methods.agent.session.list, {});
    expect(listed.sessions).toContainEqual(expect.objectContaining({ sessionId, cwd: work }));
    expect(listed.sessions[0]!.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    const elsewhere = await a.agent.request(acp.methods.agent.session.list, { cwd: join(work, 'nowhere') });
    expect(elsewhere.sessions).toEqual([]);

    await a.agent.request(acp.methods.agent.session.load, { sessionId, cwd: work, mcpServers: [] });
    // Every update came before the answer.
    expect(textOf(a, sessionId, 'user_message_chunk')).toBe('$ echo remembered');
    const calls = updatesOf(a, sessionId, 'tool_call');
    expect(calls.map((c) => [c.toolCallId, c.title])).toEqual(
      live.map((n) => [(n.update as Update<'tool_call'>).toolCallId, '$ echo remembered']),
    );
    const result = updatesOf(a, sessionId, 'tool_call_update').find((u) => u.toolCallId === calls[0]!.toolCallId)!;
    expect(result.status).toBe('completed');
    expect(contentText(result)).toContain('remembered');
    expect(textOf(a, sessionId, 'agent_message_chunk')).toContain('remembered');
    const kinds = a.updates.map((n) => n.update.sessionUpdate);
    expect(kinds.indexOf('user_message_chunk')).toBeLessThan(kinds.indexOf('tool_call'));

    // And goes on with it.
    const from = a.updates.length;
    expect((await prompt(a, sessionId, '$ echo continued')).stopReason).toBe('end_turn');
    expect(textOf(a, sessionId, 'agent_message_chunk', from)).toContain('continued');
  }, 60_000);

  it('takes a session/new without mcpServers; offers Restricted and Unrestricted as session modes; says usage and the title', async () => {
    const a = await initialized();
    // Some editors leave mcpServers out: taken as none, not a validation dump.
    const created = await a.agent.request(acp.methods.agent.session.new, { cwd: work } as acp.NewSessionRequest);
    expect(created.modes).toMatchObject({
      currentModeId: 'restricted',
      availableModes: [{ id: 'restricted' }, { id: 'unrestricted' }],
    });
    const { sessionId } = created;
    expect((await prompt(a, sessionId, '$ echo usage')).stopReason).toBe('end_turn');
    const usage = updatesOf(a, sessionId, 'usage_update').at(-1)!;
    expect(usage.size).toBeGreaterThan(0);
    expect(usage.cost).toMatchObject({ currency: 'USD' });
    expect(updatesOf(a, sessionId, 'session_info_update').at(-1)).toMatchObject({ title: '$ echo usage' });
    // Unrestricted is the agent's to ask for; Restricted can always be chosen.
    await expect(a.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: 'unrestricted' })).rejects.toMatchObject({
      code: -32602,
    });
    await a.agent.request(acp.methods.agent.session.setMode, { sessionId, modeId: 'restricted' });
    const loaded = await a.agent.request(acp.methods.agent.session.load, { sessionId, cwd: work } as acp.LoadSessionRequest);
    expect(loaded.modes).toMatchObject({ currentModeId: 'restricted' });
  }, 60_000);

  it('answers errors as JSON-RPC errors: an unknown session, content it cannot send', async () => {
    const a = await initialized();
    await expect(prompt(a, 'no-such-conversation', 'hello')).rejects.toMatchObject({ code: -32002 });
    await expect(
      a.agent.request(acp.methods.agent.session.load, { sessionId: 'no-such-conversation', cwd: work, mcpServers: [] }),
    ).rejects.toMatchObject({ code: -32002 });
    const { sessionId } = await a.agent.request(acp.methods.agent.session.new, { cwd: work, mcpServers: [] });
    await expect(
      a.agent.request(acp.methods.agent.session.prompt, { sessionId, prompt: [{ type: 'audio', mimeType: 'audio/wav', data: 'AAAA' }] }),
    ).rejects.toMatchObject({ code: -32602 });
  }, 60_000);
});
