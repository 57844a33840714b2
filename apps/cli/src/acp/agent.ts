/**
 * `bedrock acp`: Bedrock as an ACP agent (Agent Client Protocol: JSON-RPC 2.0, one message per line on
 * stdin and stdout) for editors. Each ACP session is a conversation of the Bedrock that BEDROCK_URL names,
 * reached through the public API with the CLI's connection, retries and resuming watch; updates.ts maps
 * messages and events. stdout carries the protocol only; notes go to stderr, the editor's agent log.
 * docs/cli.md, "In an editor (ACP)".
 */
import { Readable, Transform, Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import * as acp from '@agentclientprotocol/sdk';
import { Code, ConnectError } from '@connectrpc/connect';
import { DeliveryMode, MessageType, StateKind, StopReason, rejectionOf, type ConversationState, type Message } from '@bedrock/contracts';
import { createClient } from '@connectrpc/connect';
import { ConversationService, McpService } from '@bedrock/contracts';
import { apiTransport, type ApiClient } from '../connection.ts';
import { attachEditorServers, type McpClient } from './mcp-servers.ts';
import { describeError } from '../errors.ts';
import { renderWriteAccess } from '../render-conversation.ts';
import { EXIT } from '../exit-codes.ts';
import type { Output } from '../output.ts';
import { createRetry, retryPolicyFromEnv, type Retry } from '../retry.ts';
import { resumingWatch, waitsForUser, type ResumeOptions } from '../turn.ts';
import {
  PromptRefused,
  RESTRICTED,
  TurnFailed,
  UpdateTranslator,
  promptMessage,
  sessionModes,
  stopReasonOf,
  upgradeTitle,
  type SessionUpdate,
} from './updates.ts';

/** The package's version, for `agentInfo` (kept in step by hand with package.json: the bundle reads no file). */
const VERSION = '0.1.0';

/** Options of the mode-upgrade permission request. */
export const ALLOW_WRITE = 'allow';
export const KEEP_READ_ONLY = 'reject';

/**
 * How a prompt is sent (docs/cli.md, "In an editor (ACP)"): as a steer. At rest that is a plain
 * message, sent at once; during a turn (a second prompt from the editor, or a turn another client
 * started) it joins the turn at the next tool boundary — the agent reads it before its next step
 * — or, if the turn ends first, it is the next message. ACP has no way to say "queue" or
 * "interrupt": an editor that wants to interrupt cancels (session/cancel) and prompts again.
 */
const PROMPT_DELIVERY = DeliveryMode.STEER;

/** Whether messages still wait to be delivered in this state (a turn that rests with some goes on). */
function waiting(state: ConversationState): boolean {
  return state.pendingMessages.length > 0;
}

interface Turn {
  /** The stop reason, once the conversation rests after it. */
  done: Promise<acp.StopReason>;
  /** Settles once the turn's first message was sent (a prompt that joins the turn is sent after it). */
  readonly started: Promise<unknown>;
  /** The editor asked to cancel it (session/cancel). */
  cancelled: boolean;
  /** Prompts of this turn that wait in the conversation (their queued ids), withdrawn by a cancel. */
  readonly queued: string[];
}

interface Session {
  readonly id: string;
  readonly cwd: string;
  /** Said once, as the agent's text before the first prompt's turn (the default workspace used instead of the editor's directory). */
  notice?: string;
  /** The turn this process follows now, if any. */
  turn?: Turn;
}

export interface AcpOptions {
  readonly env: NodeJS.ProcessEnv;
  /** Notes for people (stderr); the protocol never goes there. */
  readonly output: Output;
  readonly input?: NodeJS.ReadableStream;
  readonly stdout?: NodeJS.WritableStream;
}

/** Serves ACP on stdin/stdout until the editor closes stdin; the exit code. */
export async function serveAcp(options: AcpOptions): Promise<number> {
  const { env, output } = options;
  const transport = apiTransport(env, 'acp');
  const api = createClient(ConversationService, transport);
  const mcp = createClient(McpService, transport);
  const policy = retryPolicyFromEnv(env);
  const closing = new AbortController();
  const retry = createRetry({ policy, output, signal: closing.signal });
  const resume: ResumeOptions = {
    budgetMs: policy.budgetMs,
    onResume: ({ attempt, delayMs, error }) =>
      output.err(
        `bedrock acp: watch disconnected (${Code[error.code]}: ${error.rawMessage}); resuming in ${delayMs} ms (attempt ${attempt})\n`,
      ),
  };
  const agent = createAgent({ api, mcp, retry, resume, signal: closing.signal, note: (text) => output.err(`bedrock acp: ${text}\n`) });
  const input = options.input ?? process.stdin;
  const stdout = options.stdout ?? process.stdout;
  const stream = acp.ndJsonStream(
    Writable.toWeb(stdout as Writable) as WritableStream<Uint8Array>,
    Readable.toWeb((input as Readable).pipe(fillMcpServers())) as ReadableStream<Uint8Array>,
  );
  const connection = agent.connect(stream);
  await connection.closed;
  closing.abort();
  return EXIT.ok;
}

interface AgentDeps {
  readonly api: ApiClient;
  /** McpService: the editor's stdio MCP servers become the session's (absent: they are ignored). */
  readonly mcp?: McpClient;
  readonly retry: Retry;
  readonly resume: ResumeOptions;
  /** Aborted when the connection closes: the watches end. */
  readonly signal: AbortSignal;
  readonly note: (text: string) => void;
}

/** The ACP agent app: one handler per method, sessions kept for the connection's life. */
export function createAgent(deps: AgentDeps): acp.AgentApp {
  const { api, retry } = deps;
  const sessions = new Map<string, Session>();

  /** Each session's translation, kept across its turns (what it said of usage, the calls it announced). */
  const translators = new Map<string, UpdateTranslator>();
  const translator = (session: Session): UpdateTranslator => {
    let t = translators.get(session.id);
    if (!t) translators.set(session.id, (t = new UpdateTranslator(session.cwd)));
    return t;
  };

  /** A session this connection knows, or a conversation of the user's that it opens on first use. */
  async function sessionOf(id: string): Promise<Session> {
    const known = sessions.get(id);
    if (known) return known;
    const c = (await call(() => api.getConversation({ conversationId: id }), id)).conversation!;
    const session: Session = { id, cwd: c.cwd };
    sessions.set(id, session);
    return session;
  }

  return acp
    .agent({ name: 'bedrock' })
    .onRequest(acp.methods.agent.initialize, () => ({
      protocolVersion: acp.PROTOCOL_VERSION,
      agentCapabilities: {
        loadSession: true,
        // SendMessage takes text and images; resources are folded into the text.
        promptCapabilities: { image: true, audio: false, embeddedContext: true },
        // The editor's stdio MCP servers run on the server's tool-runners, in the sandbox (docs/mcp.md).
        mcpCapabilities: { http: false, sse: false },
        sessionCapabilities: { list: {} },
      },
      agentInfo: { name: 'bedrock', title: 'Bedrock', version: VERSION },
      authMethods: [],
    }))
    .onRequest(acp.methods.agent.session.new, async ({ params }) => {
      // Every new conversation starts in Restricted mode; the agent asks when it needs to write.
      // The editor's directory is a host path: where the server allows none (a shared deployment),
      // the session works in the user's default workspace instead, and says so (docs/cli.md).
      let res;
      let notice: string | undefined;
      try {
        res = await retry((requestId) => api.createConversation({ cwd: params.cwd, requestId }));
      } catch (err) {
        if (ConnectError.from(err).code !== Code.PermissionDenied) throw toRequestError(err);
        res = await call(() => retry((requestId) => api.createConversation({ cwd: '', workspace: '', requestId })));
        const c = res.conversation!;
        notice = `Note: this server does not run tools in your editor's directory (${params.cwd}): host paths are off. This session works in your default workspace${c.workspaceName ? ` (${c.workspaceName})` : ''}, ${c.cwd}, on the server.`;
        deps.note(`${params.cwd} refused (host paths are off): session ${c.id} works in the default workspace, ${c.cwd}`);
      }
      const c = res.conversation!;
      sessions.set(c.id, { id: c.id, cwd: c.cwd, ...(notice ? { notice } : {}) });
      if (deps.mcp) await attachEditorServers(deps.mcp, c.id, params.mcpServers, deps.note);
      return { sessionId: c.id, modes: sessionModes(c.mode) };
    })
    .onRequest(acp.methods.agent.session.setMode, async ({ params }) => {
      // Back to Restricted at any time; Unrestricted only through the agent's request (the permission request).
      if (params.modeId !== RESTRICTED)
        throw acp.RequestError.invalidParams(
          { modeId: params.modeId },
          'Unrestricted mode is granted when the agent asks for write access and you allow it; only Restricted can be chosen here',
        );
      try {
        await retry((requestId) => api.downgradeMode({ conversationId: params.sessionId, requestId }));
      } catch (err) {
        // Restricted already: the editor's choice holds.
        if (rejectionOf(ConnectError.from(err))?.code !== 'already_restricted') throw toRequestError(err, params.sessionId);
      }
      return {};
    })
    .onRequest(acp.methods.agent.session.load, async ({ params, client }) => {
      const res = await call(() => api.getConversation({ conversationId: params.sessionId }), params.sessionId);
      const c = res.conversation!;
      const session = sessions.get(c.id) ?? { id: c.id, cwd: c.cwd };
      sessions.set(c.id, session);
      if (deps.mcp) await attachEditorServers(deps.mcp, c.id, params.mcpServers, deps.note);
      // The whole history, as it would have streamed; the answer comes after the last update.
      const translator = new UpdateTranslator(c.cwd);
      for (const m of res.messages) await send(client, c.id, translator.message(m, false));
      if (c.title) await send(client, c.id, [{ sessionUpdate: 'session_info_update', title: c.title }]);
      return { modes: sessionModes(c.mode) };
    })
    .onRequest(acp.methods.agent.session.list, async ({ params }) => {
      // Newest first; `cwd` keeps the conversations of that directory (the API has no such filter:
      // pages are read until one has some, at most 10 pages per call).
      const sessionsOut: acp.SessionInfo[] = [];
      let pageToken = params.cursor ?? '';
      for (let pages = 0; pages < 10; pages++) {
        const page = await call(() => api.listConversations({ pageToken, pageSize: 50 }));
        for (const c of page.conversations) {
          if (params.cwd && c.cwd !== params.cwd) continue;
          sessionsOut.push({
            sessionId: c.id,
            cwd: c.cwd,
            title: c.title || null,
            updatedAt: c.updatedAt
              ? new Date(Number(c.updatedAt.seconds) * 1000 + Math.floor(c.updatedAt.nanos / 1e6)).toISOString()
              : null,
          });
        }
        pageToken = page.nextPageToken;
        if (!pageToken || sessionsOut.length > 0) break;
      }
      return { sessions: sessionsOut, nextCursor: pageToken || null };
    })
    .onRequest(acp.methods.agent.session.prompt, async ({ params, client }) => {
      const session = await sessionOf(params.sessionId);
      if (session.notice) {
        const text = session.notice;
        session.notice = undefined;
        await send(client, session.id, [{ sessionUpdate: 'agent_message_chunk', content: { type: 'text', text: `${text}\n\n` } }]);
      }
      let message: ReturnType<typeof promptMessage>;
      try {
        message = promptMessage(params.prompt);
      } catch (err) {
        if (err instanceof PromptRefused) throw acp.RequestError.invalidParams(undefined, err.message);
        throw err;
      }
      const sendIt = async (turn: Turn) => {
        const res = await call(() =>
          retry((requestId) => api.sendMessage({ conversationId: session.id, ...message, requestId, delivery: PROMPT_DELIVERY })),
        );
        if (res.queuedId) turn.queued.push(res.queuedId);
        return res;
      };
      const running = session.turn;
      if (running) {
        // A prompt during a turn steers it (docs/cli.md): sent after the turn's own message, answered when it rests.
        await running.started.catch(() => undefined);
        await sendIt(running);
        return { stopReason: await running.done };
      }
      let markStarted: () => void = () => undefined;
      const started = new Promise<void>((resolve) => (markStarted = resolve));
      const turn: Turn = { started, cancelled: false, queued: [], done: Promise.resolve('end_turn') };
      turn.done = followTurn(session, client, translator(session), async () => {
        try {
          return await sendIt(turn);
        } finally {
          markStarted();
        }
      });
      session.turn = turn;
      try {
        const stopReason = await turn.done;
        // What the session holds and cost now, once its turn rests.
        const c = (await api.getConversation({ conversationId: session.id }).catch(() => undefined))?.conversation;
        const u = c?.contextUsage;
        if (c && u && u.contextWindow > 0n)
          await send(client, session.id, translator(session).usageUpdate(Number(u.usedTokens), Number(u.contextWindow), c.costMicros));
        if (c) await send(client, session.id, translator(session).titleUpdate(c.title));
        return { stopReason };
      } finally {
        if (session.turn === turn) session.turn = undefined;
      }
    })
    .onNotification(acp.methods.agent.session.cancel, async ({ params }) => {
      const turn = sessions.get(params.sessionId)?.turn;
      if (!turn) return;
      turn.cancelled = true;
      // A cancel keeps what waits in the conversation: the prompts of this turn that wait are
      // withdrawn first, so that the turn stops as the editor asked.
      for (const queuedId of turn.queued.splice(0)) {
        try {
          await retry((requestId) => api.cancelQueuedMessage({ conversationId: params.sessionId, queuedId, requestId }));
        } catch (err) {
          // Delivered meanwhile (it is in the turn now, which the cancel stops).
          deps.note(`withdrawing a waiting prompt: ${describeError(err)}`);
        }
      }
      try {
        await retry((requestId) => api.cancel({ conversationId: params.sessionId, requestId }));
      } catch (err) {
        // The turn may have come to rest meanwhile: nothing to cancel.
        deps.note(`cancel: ${describeError(err)}`);
      }
    });

  /**
   * Follows the conversation from where GetConversation saw it: sends the turn's message, then
   * streams what happens from that position on as session updates (a watch's opening snapshot
   * may be older than that: web-bff shares snapshots among watchers, and the events after an
   * older one would replay the previous turn), asks the editor when the agent wants write
   * access, and returns the stop reason once the conversation rests with nothing waiting.
   */
  async function followTurn(
    session: Session,
    client: acp.AgentContext,
    translator: UpdateTranslator,
    start: () => Promise<{ message?: Message }>,
  ) {
    const local = new AbortController();
    const stop = () => local.abort();
    deps.signal.addEventListener('abort', stop, { once: true });
    /** The turn's message (or, when it waited, any user message) was persisted: a rest counts after it. */
    let delivered = false;
    /** The approval request last answered, so that a repeated state does not ask again. */
    let answered = false;
    const ask = async (state: ConversationState) => {
      if (answered) return;
      answered = true;
      await askForWriteAccess(client, session, translator, state.upgradeReason);
    };
    try {
      const seen = await call(() => api.getConversation({ conversationId: session.id }), session.id);
      // Calls in flight and the last upgrade request, without sending them again.
      for (const m of seen.messages) translator.message(m, true);
      translator.lastStop = StopReason.UNSPECIFIED;
      const sentId = (await start()).message?.id;
      const before = seen.conversation?.state;
      if (before?.kind === StateKind.AWAITING_MODE_APPROVAL) await ask(before);
      /** The stop reason when the conversation rests in `state` after the turn's message; undefined while it goes on. */
      const settle = async (state: ConversationState): Promise<acp.StopReason | undefined> => {
        if (state.kind !== StateKind.AWAITING_MODE_APPROVAL) answered = false;
        const cancelled = session.turn?.cancelled ?? false;
        if (!delivered && !cancelled) return undefined;
        if (state.kind === StateKind.AWAITING_MODE_APPROVAL && !cancelled) {
          await ask(state);
          return undefined;
        }
        if (!waitsForUser(state.kind) || waiting(state)) return undefined;
        try {
          return stopReasonOf(state, translator.lastStop, cancelled);
        } catch (err) {
          if (err instanceof TurnFailed) throw acp.RequestError.internalError({ state: StateKind[state.kind] }, err.message);
          throw err;
        }
      };
      for await (const event of resumingWatch(api, session.id, local.signal, deps.resume, seen.sequence)) {
        const k = event.kind;
        if (k.case === 'snapshot') {
          // Only a conversation with no event yet starts with one (from position 0): there was no
          // turn before it to replay, and it may already hold the turn's message, or its end.
          const messages = k.value.messages.filter((m) => !seen.messages.some((s) => s.id === m.id));
          for (const m of messages) {
            await send(client, session.id, translator.message(m, true));
            if (m.type === MessageType.USER && m.id === sentId) delivered = true;
          }
          const state = k.value.conversation?.state;
          const stop = state && (await settle(state));
          if (stop) return stop;
          continue;
        }
        await send(client, session.id, translator.event(event));
        if (k.case === 'messagePersisted' && k.value.message?.type === MessageType.USER && (!sentId || k.value.message.id === sentId))
          delivered = true;
        if (k.case !== 'stateChanged' || !k.value.state) continue;
        const stop = await settle(k.value.state);
        if (stop) return stop;
      }
      // The connection closed (or the watch was stopped): the turn is the editor's no more.
      return 'cancelled' as const;
    } finally {
      deps.signal.removeEventListener('abort', stop);
      local.abort();
    }
  }

  /** The mode upgrade as a permission request; the editor's answer goes to RespondToModeUpgrade. */
  async function askForWriteAccess(client: acp.AgentContext, session: Session, translator: UpdateTranslator, reason: string) {
    const toolCallId = translator.upgradeToolCallId;
    // Where it would write and whether the tool user can: the tool-runner's word, read now.
    const conversation = await api.getConversation({ conversationId: session.id }).then(
      (r) => r.conversation,
      () => undefined,
    );
    const res = await client.request(acp.methods.client.session.requestPermission, {
      sessionId: session.id,
      toolCall: {
        toolCallId: toolCallId ?? `mode-upgrade-${session.id}`,
        title: upgradeTitle(reason, conversation ? renderWriteAccess(conversation) : undefined),
        kind: 'switch_mode',
        status: 'pending',
      },
      options: [
        { optionId: ALLOW_WRITE, name: 'Allow write access', kind: 'allow_once' },
        { optionId: KEEP_READ_ONLY, name: 'Keep read-only', kind: 'reject_once' },
      ],
    });
    // Cancelled: the editor cancels the turn (session/cancel), which answers for it.
    if (res.outcome.outcome !== 'selected') return;
    const approve = res.outcome.optionId === ALLOW_WRITE;
    if (!approve && toolCallId) translator.denied.add(toolCallId);
    try {
      await retry((requestId) => api.respondToModeUpgrade({ conversationId: session.id, approve, requestId }));
    } catch (err) {
      // Answered elsewhere meanwhile (the web UI, `bedrock approve`), or cancelled: the watch says what happened.
      if (!rejectionOf(ConnectError.from(err))) throw toRequestError(err);
      deps.note(`answering the upgrade request: ${describeError(err)}`);
    }
  }
}

/**
 * The editor's lines with a `mcpServers` that session/new or session/load left out (some
 * editors send none) filled in as an empty list, rather than failing the schema's validation
 * with its dump: Bedrock connects no MCP server of the editor's either way. Other lines pass
 * unchanged.
 */
export function fillMcpServers(): Transform {
  let partial = '';
  // A character split between two chunks is decoded whole.
  const decoder = new StringDecoder('utf8');
  const fix = (line: string): string => {
    if (!line.includes('"session/new"') && !line.includes('"session/load"')) return line;
    try {
      const msg = JSON.parse(line) as { method?: unknown; params?: unknown };
      const params = msg.params;
      if ((msg.method !== 'session/new' && msg.method !== 'session/load') || !params || typeof params !== 'object') return line;
      if ('mcpServers' in params && (params as { mcpServers?: unknown }).mcpServers != null) return line;
      return JSON.stringify({ ...msg, params: { ...params, mcpServers: [] } });
    } catch {
      return line;
    }
  };
  return new Transform({
    transform(chunk: Buffer, _enc, done) {
      const lines = (partial + decoder.write(chunk)).split('\n');
      partial = lines.pop() ?? '';
      done(null, lines.map((l) => `${fix(l)}\n`).join(''));
    },
    flush(done) {
      const rest = partial + decoder.end();
      done(null, rest ? fix(rest) : '');
    },
  });
}

/** Sends session updates in order. */
async function send(client: acp.AgentContext, sessionId: string, updates: SessionUpdate[]): Promise<void> {
  for (const update of updates) await client.notify(acp.methods.client.session.update, { sessionId, update });
}

/** A call to the public API whose failure becomes the JSON-RPC error an editor shows. */
async function call<T>(run: () => Promise<T>, sessionId?: string): Promise<T> {
  try {
    return await run();
  } catch (err) {
    throw toRequestError(err, sessionId);
  }
}

function toRequestError(err: unknown, sessionId?: string): acp.RequestError {
  if (err instanceof acp.RequestError) return err;
  const e = ConnectError.from(err);
  if (e.code === Code.NotFound && sessionId !== undefined) return acp.RequestError.sessionNotFound(sessionId);
  const rejection = rejectionOf(e);
  const data = { code: Code[e.code], ...(rejection ? { rejection: rejection.code } : {}) };
  if (e.code === Code.InvalidArgument) return acp.RequestError.invalidParams(data, e.rawMessage);
  if (e.code === Code.Unauthenticated) return acp.RequestError.authRequired(data, describeError(err));
  return new acp.RequestError(-32603, describeError(err), data);
}
