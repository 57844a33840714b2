/**
 * End to end: every service as its own process in the cluster layout (2 conversation,
 * 2 gateway, 3 tool-runner, 1 web-bff) against real Postgres and Redis, driven only through
 * the public API; the model is the scripted local Messages API server, reached by the
 * gateways through the real SDK.
 */
import { readFileSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient, type Interceptor } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import {
  ConversationService,
  DeliveryMode,
  ErrorKind,
  MessageType,
  Mode,
  StateKind,
  ToolExecJobSchema,
  ToolRunnerService,
  health,
  USER_HEADER,
} from '@bedrock/contracts';
import { serviceTokenInterceptor } from '@bedrock/platform/server';
import type { ScriptedMessage } from '@bedrock/offline-model';
import { startE2e, type E2e } from './support/e2e.ts';

let e: E2e;
beforeAll(async () => {
  e = await startE2e('flows');
}, 180_000);
afterAll(async () => {
  await e?.close();
}, 60_000);

const say = (text: string, usage?: ScriptedMessage['usage']): ScriptedMessage => ({
  kind: 'message',
  content: [{ type: 'text', text }],
  ...(usage ? { usage } : {}),
});
const call = (name: string, input: unknown, id?: string) => ({ type: 'tool_use' as const, name, input, ...(id ? { id } : {}) });
const tools = (...blocks: ReturnType<typeof call>[]): ScriptedMessage => ({ kind: 'message', content: blocks });

async function converse(text: string) {
  const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
  await e.client.sendMessage({ conversationId: conv.id, text });
  return conv.id;
}

/** Like converse, but watching from before the message is sent, so no event is missed. */
async function converseWatched(text: string) {
  const conv = (await e.client.createConversation({ cwd: '/tmp' })).conversation!;
  const watcher = e.watch(conv.id);
  await e.waitFor('the watch snapshot', () => watcher.events.some((ev) => ev.kind.case === 'snapshot'));
  await e.client.sendMessage({ conversationId: conv.id, text });
  return { id: conv.id, watcher };
}

async function rest(id: string, kind = StateKind.IDLE) {
  return e.waitFor(`${id} to reach ${StateKind[kind]}`, async () => (await e.stateOf(id)) === kind);
}

async function toolResults(id: string) {
  const { messages } = await e.client.getConversation({ conversationId: id });
  return messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
}

function requestsFor(key: string) {
  return e.llm.requests.filter((r) => {
    const first = r.body?.messages.find((m) => m.role === 'user');
    const text = typeof first?.content === 'string' ? first.content : (first?.content ?? []).map((b) => b.text ?? '').join('');
    return text.startsWith(key);
  });
}

describe('end to end through the public API', () => {
  it('runs a full turn with three tools serially, in order', async () => {
    e.route(
      'three tools',
      tools(
        call('bash', { command: 'echo one' }),
        call('bash', { command: 'sleep 0.2; echo two' }),
        call('bash', { command: 'echo three' }),
      ),
      say('All three ran.'),
    );
    const id = await converse('three tools please');
    await rest(id);
    expect((await toolResults(id)).map((r) => r.content.trim())).toEqual(['one', 'two', 'three']);
    const second = requestsFor('three tools')[1]!;
    const last = second.body!.messages[second.body!.messages.length - 1]!;
    expect(Array.isArray(last.content) && last.content.map((b) => b.type)).toEqual(['tool_result', 'tool_result', 'tool_result']);
  });

  it('steers a multi-tool turn: the message joins the tool results of the next request; a queued one follows at rest', async () => {
    e.route(
      'steer me',
      tools(call('bash', { command: 'sleep 0.5; echo one' }), call('bash', { command: 'echo two' })),
      say('Looking at two.'),
      say('And the queued one.'),
    );
    const id = await converse('steer me');
    await rest(id, StateKind.TOOL_EXECUTING);
    const queued = await e.client.sendMessage({ conversationId: id, text: 'then summarise', delivery: DeliveryMode.QUEUE });
    const steered = await e.client.sendMessage({ conversationId: id, text: 'focus on two', delivery: DeliveryMode.STEER });
    expect(queued.queuedId).not.toBe('');
    expect(steered.queuedId).not.toBe('');
    await e.waitFor('the queued message to be answered', () => requestsFor('steer me').length === 3);
    await rest(id);
    // The strict local Messages API server answered every request (it refuses an invalid history).
    const [, second, third] = requestsFor('steer me');
    const last = (r: typeof second) => r!.body!.messages[r!.body!.messages.length - 1]!;
    const blocks = last(second).content;
    expect(Array.isArray(blocks) && blocks.map((b) => b.type)).toEqual(['tool_result', 'tool_result', 'text']);
    expect(Array.isArray(blocks) && blocks[2]!.text).toBe('focus on two');
    const final = last(third).content;
    expect(typeof final === 'string' ? final : final.map((b) => b.text).join('')).toBe('then summarise');
    expect((await e.client.getConversation({ conversationId: id })).conversation!.state!.pendingMessages).toEqual([]);
  });

  it('cancels a running tool: its process group is gone, results are synthetic, the conversation is idle', async () => {
    e.route('cancel a tool', tools(call('bash', { command: 'echo PID=$$; sleep 300 & wait' }), call('bash', { command: 'echo never' })));
    const { id, watcher } = await converseWatched('cancel a tool');
    const pid = await e.waitFor('the tool to print its pid', () => {
      const out = watcher.events.flatMap((ev) => (ev.kind.case === 'toolOutput' ? [ev.kind.value.text] : [])).join('');
      const m = /PID=(\d+)/.exec(out);
      return m ? Number(m[1]) : undefined;
    });
    const started = Date.now();
    await e.client.cancel({ conversationId: id });
    await rest(id);
    await e.waitFor(
      'the tool process to be gone',
      () => {
        try {
          process.kill(pid, 0);
          return false;
        } catch {
          return true;
        }
      },
      10_000,
    );
    expect(Date.now() - started).toBeLessThan(10_000);
    // What the tool printed before the cancel (its pid) stays above the marker.
    expect((await toolResults(id)).map((r) => [r.content, r.cancelled])).toEqual([
      [`PID=${pid}\n\nCancelled by user`, true],
      ['Skipped due to cancellation', true],
    ]);
    watcher.stop();
  });

  it('cancels during an LLM request: the HTTP stream is aborted and nothing partial is persisted', async () => {
    e.route('hang please', { kind: 'hang' });
    const id = await converse('hang please');
    const request = await e.waitFor('the request to reach the model', () => requestsFor('hang please')[0]);
    await e.client.cancel({ conversationId: id });
    await rest(id);
    await e.waitFor('the upstream request to be aborted', () => e.llm.clientAborts.some((a) => a.requestId === request.requestId));
    const { messages } = await e.client.getConversation({ conversationId: id });
    expect(messages.map((m) => m.type)).toEqual([MessageType.USER]);
  });

  it('retries a 529 visibly on the watch stream, then succeeds', async () => {
    e.route('overloaded', { kind: 'error', status: 529, errorType: 'overloaded_error', message: 'Overloaded' }, say('Recovered.'));
    const { id, watcher } = await converseWatched('overloaded first');
    await rest(id);
    const retry = await e.waitFor('a retry notice', () => watcher.events.find((ev) => ev.kind.case === 'retryScheduled'));
    expect(
      retry.kind.case === 'retryScheduled' && [retry.kind.value.attempt, retry.kind.value.maxAttempts, retry.kind.value.errorKind],
    ).toEqual([2, 3, ErrorKind.SERVER]);
    watcher.stop();
  });

  it('shows an auth error with its kind, then recovers with a new message', async () => {
    e.route(
      'auth trouble',
      { kind: 'error', status: 401, errorType: 'authentication_error', message: 'invalid x-api-key' },
      say('Fine now.'),
    );
    const id = await converse('auth trouble');
    await rest(id, StateKind.ERROR);
    const state = (await e.client.getConversation({ conversationId: id })).conversation!.state!;
    expect(state.errorKind).toBe(ErrorKind.AUTH);
    await e.client.sendMessage({ conversationId: id, text: 'try again' });
    await rest(id);
  });

  it('approves an upgrade, writes, then is downgraded and the agent is told', async () => {
    e.route(
      'upgrade me',
      tools(call('request_mode_upgrade', { reason: 'write the fix' })),
      tools(call('bash', { command: 'echo written > /tmp/bedrock-e2e-approved && cat /tmp/bedrock-e2e-approved' })),
      say('Written.'),
      say('Understood, read-only again.'),
    );
    const id = await converse('upgrade me');
    await rest(id, StateKind.AWAITING_MODE_APPROVAL);
    const approved = await e.client.respondToModeUpgrade({ conversationId: id, approve: true });
    expect(approved.conversation!.mode).toBe(Mode.UNRESTRICTED);
    await rest(id);
    expect((await toolResults(id)).map((r) => r.content.trim())).toContain('written');
    const down = await e.client.downgradeMode({ conversationId: id });
    expect(down.conversation!.mode).toBe(Mode.RESTRICTED);
    await e.client.sendMessage({ conversationId: id, text: 'carry on' });
    await rest(id);
    const lastRequest = requestsFor('upgrade me').at(-1)!;
    expect(JSON.stringify(lastRequest.body!.messages)).toContain('Mode changed to Restricted');
  });

  it('denies an upgrade: the agent gets the denial and the mode stays Restricted', async () => {
    e.route('deny me', tools(call('request_mode_upgrade', { reason: 'please' })), say('OK, staying read-only.'));
    const id = await converse('deny me');
    await rest(id, StateKind.AWAITING_MODE_APPROVAL);
    const denied = await e.client.respondToModeUpgrade({ conversationId: id, approve: false });
    expect(denied.conversation!.mode).toBe(Mode.RESTRICTED);
    await rest(id);
    expect((await toolResults(id))[0]!.content).toMatch(/denied/);
  });

  it('runs two sub-agents in parallel, one failing, and the parent gets both outcomes', async () => {
    const slow = (m: ScriptedMessage): ScriptedMessage => ({ ...m, delayMs: 800 });
    e.route(
      'parent of two',
      tools(call('spawn_agents', { tasks: [{ task: 'sub task A' }, { task: 'sub task B' }] })),
      say('Both reported.'),
    );
    e.route('sub task A', slow(tools(call('submit_result', { result: 'A is done', success: true }))));
    e.route('sub task B', { kind: 'error', status: 401, errorType: 'authentication_error', message: 'no access for B', delayMs: 800 });
    const id = await converse('parent of two');
    await rest(id);
    const [a, b] = [requestsFor('sub task A')[0]!, requestsFor('sub task B')[0]!];
    // Parallel: each started before the other was answered (each answer takes 800 ms).
    expect(Math.abs(a.receivedAt - b.receivedAt)).toBeLessThan(800);
    const aggregated = (await toolResults(id))[0]!.content;
    expect(aggregated).toMatch(/2 spawned, 1 succeeded, 1 failed/);
    expect(aggregated).toContain('A is done');
    expect(aggregated).toContain('no access for B');
    // Sub-agents are hidden from the listing but visible from their parent.
    const listed = (await e.client.listConversations({})).conversations.map((c) => c.id);
    const children = (await e.client.listConversations({ parentId: id })).conversations;
    expect(children).toHaveLength(2);
    for (const child of children) {
      expect(listed).not.toContain(child.id);
      expect(child.mode).toBe(Mode.RESTRICTED);
    }
  });

  it('asks for a continuation summary at 90% without running the tools, then rejects messages', async () => {
    e.route(
      'long conversation',
      {
        kind: 'message',
        content: [{ type: 'text', text: 'Let me run more.' }, call('bash', { command: 'echo should-not-run' })],
        usage: { input_tokens: 185_000, output_tokens: 100 },
      },
      say('Summary: we did many things.'),
    );
    const id = await converse('long conversation');
    await rest(id, StateKind.CONTEXT_EXHAUSTED);
    const summaryRequest = requestsFor('long conversation')[1]!;
    // Sent as a turn is, so its prefix is read from the cache: the same tools and no tool_choice;
    // the prompt asks for text only (a tool call in the answer would not be run).
    expect(summaryRequest.body!.tool_choice).toBeUndefined();
    expect(summaryRequest.body!.tools?.map((t) => t.name)).toContain('bash');
    expect(JSON.stringify(summaryRequest.body!.messages)).toContain('do not call any tool');
    expect(JSON.stringify(summaryRequest.body!.messages)).toContain('not executed due to context limits');
    const got = await e.client.getConversation({ conversationId: id });
    expect(got.conversation!.state!.summary).toBe('Summary: we did many things.');
    expect((await toolResults(id)).every((r) => r.cancelled)).toBe(true);
    const err = await e.client.sendMessage({ conversationId: id, text: 'more?' }).catch((x: unknown) => x);
    expect(err).toBeInstanceOf(ConnectError);
    expect((err as ConnectError).code).toBe(Code.FailedPrecondition);
    expect((err as ConnectError).rawMessage).toMatch(/context limit/);
  });
  it('serves /metrics on every process, with the families each service records', async () => {
    const scrape = async (p: (typeof e.cluster.processes)[number]) => {
      const res = await fetch(`http://127.0.0.1:${p.metricsPort}/metrics`);
      expect([p.name, res.status, res.headers.get('content-type')?.startsWith('text/plain')]).toEqual([p.name, 200, true]);
      return res.text();
    };
    const texts = new Map<string, string>();
    for (const p of e.cluster.processes) texts.set(p.name, await scrape(p));
    const of = (service: string) => e.cluster.processes.filter((p) => p.service === service).map((p) => texts.get(p.name)!);
    // A family with a given label on at least one replica (work lands on whichever replica takes it).
    const anyHas = (service: string, re: RegExp) =>
      expect([service, String(re), of(service).some((t) => re.test(t))]).toEqual([service, String(re), true]);
    const allHave = (service: string, re: RegExp) =>
      expect([service, String(re), of(service).every((t) => re.test(t))]).toEqual([service, String(re), true]);
    for (const p of e.cluster.processes) {
      const t = texts.get(p.name)!;
      expect([p.name, t.includes(`service="${p.service}"`), /^process_resident_memory_bytes\{/m.test(t)]).toEqual([p.name, true, true]);
    }
    anyHas('conversation', /^bedrock_transitions_total\{[^}]*event="[a-z_]+"/m);
    anyHas('conversation', /^bedrock_rpc_server_seconds_count\{[^}]*method="bedrock\.v1\.ConversationService\/SendMessage"/m);
    allHave('llm-gateway', /^bedrock_queue_depth\{(?=[^}]*queue="llm-requests")(?=[^}]*state="waiting")/m);
    anyHas('llm-gateway', /^bedrock_jobs_total\{(?=[^}]*queue="llm-requests")(?=[^}]*outcome="completed")/m);
    anyHas('llm-gateway', /^bedrock_queue_wait_seconds_count\{(?=[^}]*queue="llm-requests")/m);
    anyHas('llm-gateway', /^bedrock_llm_tokens_total\{[^}]*kind="output"/m);
    anyHas('llm-gateway', /^bedrock_llm_request_seconds_count\{[^}]*outcome="ok"/m);
    anyHas('llm-gateway', /^bedrock_llm_request_seconds_count\{[^}]*outcome="cancelled"/m);
    anyHas('llm-gateway', /^bedrock_llm_time_to_first_token_seconds_count\{/m);
    anyHas('llm-gateway', /^bedrock_active_streams\{(?=[^}]*kind="llm")/m);
    allHave('tool-runner', /^bedrock_queue_depth\{(?=[^}]*queue="tool-exec")(?=[^}]*state="waiting")/m);
    anyHas('tool-runner', /^bedrock_tool_duration_seconds_count\{(?=[^}]*tool="bash")(?=[^}]*outcome="ok")/m);
    anyHas('tool-runner', /^bedrock_tool_duration_seconds_count\{(?=[^}]*tool="bash")(?=[^}]*outcome="cancelled")/m);
    anyHas('tool-runner', /^bedrock_jobs_total\{(?=[^}]*queue="tool-exec")(?=[^}]*outcome="completed")/m);
    anyHas('web-bff', /^bedrock_active_streams\{(?=[^}]*kind="watch")/m);
    allHave('conversation', /^bedrock_queue_depth\{(?=[^}]*queue="conversation-events")(?=[^}]*state="waiting")/m);
    anyHas('conversation', /^bedrock_jobs_total\{(?=[^}]*queue="conversation-events")(?=[^}]*outcome="completed")/m);
    anyHas('conversation', /^bedrock_job_latency_seconds_bucket\{(?=[^}]*queue="conversation-events")(?=[^}]*le="0\.001")/m);
    // Every turn has a trace (the caller's or a new one): the gateways' and runners' job log lines carry its id.
    for (const service of ['llm-gateway', 'tool-runner']) {
      const lines = e.cluster.processes.filter((p) => p.service === service).flatMap((p) => readFileSync(p.logFile, 'utf8').split('\n'));
      expect([service, lines.some((l) => /"trace_id":"[\da-f]{32}"/.test(l))]).toEqual([service, true]);
    }
  });

  it('internal ports answer only services: the user header counts only from web-bff; health is open', async () => {
    const { secrets } = e.cluster;
    const mode = (path: string) => statSync(path).mode & 0o777;
    expect(mode(dirname(secrets.peersFile))).toBe(0o700);
    for (const file of [secrets.peersFile, ...Object.values(secrets.tokenFiles)]) expect([file, mode(file)]).toEqual([file, 0o600]);
    const token = (service: keyof typeof secrets.tokenFiles) => readFileSync(secrets.tokenFiles[service], 'utf8').trim();
    const asUser: Interceptor = (next) => (req) => {
      req.header.set(USER_HEADER, e.cluster.userId);
      return next(req);
    };
    const url = (name: string) => `http://127.0.0.1:${e.cluster.byName(name).env.BEDROCK_GRPC_PORT}`;
    const codeOf = (p: Promise<unknown>) =>
      p.then(
        () => 'ok',
        (err: unknown) => Code[ConnectError.from(err).code],
      );

    const conversation = (...interceptors: Interceptor[]) =>
      createClient(ConversationService, createGrpcTransport({ baseUrl: url('conversation-1'), interceptors }));
    expect(await codeOf(conversation().listConversations({}))).toBe('Unauthenticated');
    expect(await codeOf(conversation(asUser).listConversations({}))).toBe('Unauthenticated');
    expect(await codeOf(conversation(serviceTokenInterceptor(token('tool-runner')), asUser).listConversations({}))).toBe('Unauthenticated');
    expect(await codeOf(conversation(serviceTokenInterceptor(token('web-bff')), asUser).listConversations({}))).toBe('ok');
    const probe = createClient(health.Health, createGrpcTransport({ baseUrl: url('conversation-1') }));
    expect((await probe.check({ service: '' })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);

    const runner = (...interceptors: Interceptor[]) =>
      createClient(ToolRunnerService, createGrpcTransport({ baseUrl: url('tool-runner-1'), interceptors }));
    const job = create(ToolExecJobSchema, {
      toolUseId: `e2e-identity-${Date.now()}`,
      conversationId: 'e2e-identity',
      toolName: 'bash',
      inputJson: JSON.stringify({ command: 'echo ran' }),
      cwd: '/tmp',
      mode: Mode.UNRESTRICTED,
    });
    const execute = async (...interceptors: Interceptor[]) => {
      let content = '';
      for await (const msg of runner(...interceptors).executeTool({ job }))
        if (msg.kind.case === 'result') content = msg.kind.value.content;
      return content;
    };
    expect(await codeOf(execute())).toBe('Unauthenticated');
    expect(await codeOf(execute(serviceTokenInterceptor(`${token('conversation')}x`)))).toBe('Unauthenticated');
    expect(await execute(serviceTokenInterceptor(token('conversation')))).toBe('ran\n');
  });
});
