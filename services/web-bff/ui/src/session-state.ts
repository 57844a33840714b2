/**
 * One open conversation as the watch stream tells it (no DOM): the conversation, its state and mode, the context figure,
 * the transcript, its sub-agents and its parent's or fork source's title, whether it exists at all, and the messages
 * waiting in it (the service's queue, `state.pending_messages`). Every change calls `changed`; session.ts adds the actions.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import {
  isFinished,
  Mode,
  StateKind,
  type ContextUsage,
  type Conversation,
  type ConversationEvent,
  type ConversationState,
  type Message,
  type PendingMessage,
} from '@bedrock/contracts';
import { errorKindLabel, isBusy, peakUsage, usageView, type PendingRetry, type UsageFigures } from '@bedrock/agent-view/format';
import { timestampMs } from '@bufbuild/protobuf/wkt';
import { errorText, isUnauthenticated, type Api, type McpApi, type WorkspaceApi } from './api.ts';
import { conversationTitle, inSpawnOrder } from './titles.ts';
import { TranscriptModel } from './transcript-model.ts';
import { watch } from './watch.ts';

export interface SessionDeps {
  readonly api: Api;
  /** The user's workspaces: a continuation starts in its source's workspace and directory. */
  readonly workspaces?: WorkspaceApi;
  /** The user's MCP servers: the settings' per-conversation switches. */
  readonly mcp?: McpApi;
  /** The token was refused: back to the sign-in form with this message. */
  authFailed(message: string): void;
  /** Something the conversation list shows changed (state, a new conversation). */
  listChanged(): void;
  navigate(path: string): void;
}

/** A sub-agent as its parent shows it: a link with its title and state. */
export interface SubAgentView {
  readonly id: string;
  readonly title: string;
  readonly kind: StateKind;
  readonly createdMs: number;
}

/** How long after a sub-agent's progress its parent asks for their titles and states again. */
const SUB_AGENT_REFRESH_MS = 300;

/** Loading until the first snapshot; then live; or one clear page saying why not. */
export type Phase = { kind: 'loading' } | { kind: 'live' } | { kind: 'not-found' } | { kind: 'unavailable'; message: string };

export class SessionState {
  phase: Phase = { kind: 'loading' };
  conversation: Conversation | undefined;
  state: ConversationState | undefined;
  mode = Mode.UNSPECIFIED;
  private usage: ContextUsage | undefined;
  /** The largest context figure seen: the service reports the last response's. */
  private peakTokens = 0n;
  retry: PendingRetry | undefined;
  upgradeReason = '';
  connected = true;
  readonly transcript = new TranscriptModel();
  /** This conversation's sub-agents (spawn order), and their titles by id (a new map when one changes). */
  subAgents: readonly SubAgentView[] = [];
  subAgentTitles: ReadonlyMap<string, string> = new Map();
  /** A sub-agent's parent's title, once fetched ('' until then, or when it could not be). */
  parentTitle = '';
  private parentAsked = false;
  /** A fork's source's title, once fetched ('' until then, or when it could not be). */
  forkSourceTitle = '';
  private forkSourceAsked = false;
  private subAgentTimer: number | undefined;
  private lastListedKind: StateKind | undefined;
  private stopWatch: (() => void) | undefined;
  private ticker: number | undefined;
  changed: () => void = () => {};

  constructor(
    protected readonly deps: SessionDeps,
    readonly id: string,
  ) {}

  start(): void {
    this.stopWatch = watch(this.deps.api, this.id, {
      event: (e) => this.onEvent(e),
      connected: (ok) => {
        this.connected = ok;
        this.changed();
      },
      failed: (err) => {
        if (isUnauthenticated(err)) return this.deps.authFailed(errorText(err));
        const code = ConnectError.from(err).code;
        // A malformed id is as unknown as a well-formed one that does not exist.
        this.phase =
          code === Code.NotFound || code === Code.InvalidArgument
            ? { kind: 'not-found' }
            : { kind: 'unavailable', message: errorText(err) };
        this.changed();
      },
    });
  }

  dispose(): void {
    this.stopWatch?.();
    if (this.subAgentTimer !== undefined) window.clearTimeout(this.subAgentTimer);
    this.subAgentTimer = undefined;
    if (this.ticker !== undefined) window.clearInterval(this.ticker);
    this.ticker = undefined;
  }

  get api(): Api {
    return this.deps.api;
  }

  get mcp(): McpApi | undefined {
    return this.deps.mcp;
  }

  authFailed(message: string): void {
    this.deps.authFailed(message);
  }

  get kind(): StateKind {
    return this.state?.kind ?? StateKind.UNSPECIFIED;
  }

  /** The context figure to show: the peak, also after a continuation. */
  get contextUsage(): UsageFigures | undefined {
    return peakUsage(this.usage, [], this.peakTokens);
  }

  /** The messages waiting in the conversation, in the order they will go (the service's queue). */
  get pending(): readonly PendingMessage[] {
    return this.state?.pendingMessages ?? [];
  }

  get canCancel(): boolean {
    return isBusy(this.kind) && this.kind !== StateKind.CANCELLING;
  }

  /** Why a message would wait now, in words, or ''. */
  get busyHint(): string {
    const kind = this.kind;
    if (kind === StateKind.AWAITING_MODE_APPROVAL)
      return 'Waiting for your approval of Unrestricted mode. A message you send now waits until the turn ends.';
    if (kind === StateKind.CANCELLING) return 'Cancelling… A message you send now goes out when it has stopped.';
    if (isBusy(kind))
      return 'The agent is working. A message you send now waits until it finishes; Alt+Enter steers it in at the next tool boundary; Esc cancels the turn.';
    return '';
  }

  /** The service's answer to a rename (the watch's title_changed says the same, a moment later). */
  renamed(changed: Conversation | undefined): void {
    if (this.conversation && changed) this.titleIs(changed.title);
  }

  private titleIs(title: string): void {
    if (!this.conversation || this.conversation.title === title) return;
    this.conversation = { ...this.conversation, title };
    this.deps.listChanged();
    this.changed();
  }

  private setSubAgents(agents: readonly SubAgentView[]): void {
    this.subAgents = inSpawnOrder(agents);
    this.subAgentTitles = new Map(this.subAgents.map((a) => [a.id, a.title]));
  }

  /** Asks for the sub-agents again (titles and states), soon: several progress events make one call. */
  private refreshSubAgents(): void {
    if (this.subAgentTimer !== undefined) return;
    this.subAgentTimer = window.setTimeout(() => {
      this.subAgentTimer = undefined;
      this.deps.api.listConversations({ parentId: this.id, pageSize: 100 }).then(
        (res) => {
          this.setSubAgents(res.conversations.map(subAgentView));
          this.changed();
        },
        // The progress events still show them; the next one asks again.
        () => undefined,
      );
    }, SUB_AGENT_REFRESH_MS);
  }

  /** A sub-agent names its parent by title: asked once. */
  private loadParent(parentId: string): void {
    if (this.parentAsked) return;
    this.parentAsked = true;
    this.deps.api.getConversation({ conversationId: parentId }).then(
      (res) => {
        if (!res.conversation) return;
        this.parentTitle = conversationTitle(res.conversation);
        this.changed();
      },
      // The link back still works; it says "its parent".
      () => undefined,
    );
  }

  /** A fork names its source by title: asked once. */
  private loadForkSource(sourceId: string): void {
    if (this.forkSourceAsked) return;
    this.forkSourceAsked = true;
    this.deps.api.getConversation({ conversationId: sourceId }).then(
      (res) => {
        if (!res.conversation) return;
        this.forkSourceTitle = conversationTitle(res.conversation);
        this.changed();
      },
      // The link still works; it says "the conversation it came from".
      () => undefined,
    );
  }

  /** The service's answer to a settings change. */
  settingsChanged(changed: Conversation | undefined): void {
    if (this.conversation && changed)
      this.conversation = { ...this.conversation, thinking: changed.thinking, serverTools: changed.serverTools };
    this.changed();
  }

  private sawUsage(u: ContextUsage | undefined): void {
    if (!u) return;
    this.usage = u;
    if (u.usedTokens > this.peakTokens) this.peakTokens = u.usedTokens;
  }

  private sawMessages(messages: readonly Message[]): void {
    const peak = peakUsage({ usedTokens: this.peakTokens, contextWindow: 0n, warning: false }, messages)?.usedTokens ?? 0n;
    if (peak > this.peakTokens) this.peakTokens = peak;
  }

  private onEvent(e: ConversationEvent): void {
    const now = performance.now();
    switch (e.kind.case) {
      case 'snapshot': {
        const c = e.kind.value.conversation;
        this.conversation = c;
        if (c) {
          this.state = c.state;
          this.mode = c.mode;
          this.sawUsage(c.contextUsage);
        }
        this.sawMessages(e.kind.value.messages);
        this.setSubAgents(e.kind.value.subAgents.map(subAgentView));
        if (c?.parentId) this.loadParent(c.parentId);
        this.retry = retryFromState(this.state, now, this.retry);
        this.transcript.reset(e.kind.value.messages);
        if (c?.forkedFrom) this.loadForkSource(c.forkedFrom.conversationId);
        this.phase = { kind: 'live' };
        break;
      }
      case 'stateChanged': {
        const v = e.kind.value;
        this.state = v.state;
        if (v.mode !== Mode.UNSPECIFIED) this.mode = v.mode;
        this.sawUsage(v.contextUsage);
        this.retry = retryFromState(this.state, now, this.retry);
        break;
      }
      case 'messagePersisted': {
        const m = e.kind.value.message;
        if (m) {
          this.sawMessages([m]);
          this.transcript.add(m);
        }
        break;
      }
      // Text and output as they stream change the transcript alone, which draws itself: the rest of
      // the view is not drawn again for each of hundreds of deltas a second.
      case 'tokenDelta':
        this.transcript.tokenDelta(e.kind.value);
        return;
      case 'toolOutput':
        this.transcript.toolOutput(e.kind.value.toolUseId, e.kind.value.text);
        return;
      case 'retryScheduled': {
        const v = e.kind.value;
        this.retry = {
          attempt: v.attempt,
          maxAttempts: v.maxAttempts,
          at: now + Number(v.delayMs),
          errorKind: v.errorKind,
          errorMessage: v.errorMessage,
        };
        const failed = `Attempt ${v.attempt - 1} of ${v.maxAttempts} failed (${errorKindLabel(v.errorKind)})${v.errorMessage ? `: ${v.errorMessage}` : '.'}`;
        this.transcript.notice(
          `${failed}\nRetrying: attempt ${v.attempt} of ${v.maxAttempts} in ${Math.ceil(Number(v.delayMs) / 1000)}s.`,
          'warn',
          'retry',
        );
        break;
      }
      case 'modeUpgradeRequested':
        this.upgradeReason = e.kind.value.reason;
        break;
      case 'modeChanged':
        this.mode = e.kind.value.mode;
        break;
      case 'contextWarning': {
        this.sawUsage(e.kind.value.contextUsage);
        const pct = Math.round(usageView(this.contextUsage).fraction * 100);
        this.transcript.notice(
          `The context window is ${pct}% full. You can summarise this conversation and continue in a new one.`,
          'warn',
          'context',
        );
        break;
      }
      case 'notice':
        // The gateway's word on how the model was asked (for the user; the model never sees it).
        this.transcript.notice(e.kind.value.text, 'info', 'other');
        break;
      case 'contextExhausted':
        if (this.state) this.state = { ...this.state, kind: StateKind.CONTEXT_EXHAUSTED, summary: e.kind.value.summary };
        break;
      case 'subAgentProgress': {
        const p = e.kind.value;
        this.transcript.subAgentProgress(p);
        const known = this.subAgents.find((a) => a.id === p.subAgentId);
        const shown: SubAgentView = known
          ? { ...known, kind: p.state }
          : { id: p.subAgentId, title: p.task.split('\n')[0]!.trim() || 'Sub-agent', kind: p.state, createdMs: Date.now() };
        this.setSubAgents([...this.subAgents.filter((a) => a !== known), shown]);
        this.refreshSubAgents();
        break;
      }
      case 'titleChanged':
        this.titleIs(e.kind.value.title);
        return;
      case 'historyRewound':
        // RewindConversation cut the history: what came after the kept message goes.
        this.transcript.cut(e.kind.value.through);
        break;
      default:
        return;
    }
    const kind = this.kind;
    if (kind !== StateKind.AWAITING_MODE_APPROVAL) this.upgradeReason = '';
    this.transcript.onState(kind, this.state?.currentToolUseId ?? '');
    this.tick();
    if (kind !== this.lastListedKind) {
      this.lastListedKind = kind;
      this.deps.listChanged();
    }
    this.changed();
  }

  /** Keeps the retry countdown moving while a retry waits. */
  private tick(): void {
    if (this.retry && this.ticker === undefined) this.ticker = window.setInterval(() => this.changed(), 250);
    if (!this.retry && this.ticker !== undefined) {
      window.clearInterval(this.ticker);
      this.ticker = undefined;
    }
  }

  /** Whether the conversation takes messages at all (not finished, not a sub-agent's). */
  get acceptsMessages(): boolean {
    const kind = this.kind;
    return Boolean(this.conversation?.userInitiated) && kind !== StateKind.CONTEXT_EXHAUSTED && !isFinished(kind);
  }
}

function subAgentView(c: Conversation): SubAgentView {
  return {
    id: c.id,
    title: conversationTitle(c),
    kind: c.state?.kind ?? StateKind.UNSPECIFIED,
    createdMs: c.createdAt ? timestampMs(c.createdAt) : 0,
  };
}

/** A retry pending according to the state (kept as is when already known, so the countdown does not jump). */
function retryFromState(state: ConversationState | undefined, now: number, known: PendingRetry | undefined): PendingRetry | undefined {
  if (!state || state.retryDelayMs === 0n) return undefined;
  if (state.kind !== StateKind.LLM_REQUESTING && state.kind !== StateKind.AWAITING_CONTINUATION) return undefined;
  if (known && known.attempt === state.attempt) return known;
  return {
    attempt: state.attempt,
    maxAttempts: state.maxAttempts,
    at: now + Number(state.retryDelayMs),
    errorKind: state.errorKind,
    errorMessage: state.errorMessage,
  };
}
