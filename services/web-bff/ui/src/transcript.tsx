/**
 * The transcript on screen (its content is transcript-model.ts). Each item re-renders only
 * when its rev changed, so a token delta touches the streaming answer alone; the list keeps
 * the reader's place unless they were at the bottom, where it follows new content. Your
 * messages and the agent's answers at rest have a "Fork from here" button (shown on hover or
 * focus; always on a touch screen); a place the service refuses shows its answer under the message.
 */
import type { ComponentChildren } from 'preact';
import type { ContentBlock } from '@bedrock/contracts';
import { StateKind } from '@bedrock/contracts';
import { COMPACTING } from '@bedrock/agent-view/agent-content';
import { useContext, useEffect, useLayoutEffect, useMemo, useRef, useState } from 'preact/hooks';
import { CopyButton } from './copy.tsx';
import { BlockMarkdown, Markdown } from './markdown-view.tsx';
import { perFrame } from './frame.ts';
import { memo } from './memo.ts';
import { useRewindAction } from './rewind.tsx';
import { RelativeTime } from './time.tsx';
import { withSubAgentTitles } from './titles.ts';
import { ForkContext, SubAgentNamesContext } from './transcript-context.ts';
import { ServerTool, SourceLink, ToolCardView } from './transcript-tools.tsx';
import type { AgentItem, Item, Live, Part } from './transcript-items.ts';
import { joinBlocks, type TranscriptModel } from './transcript-model.ts';

export { ForkContext, SubAgentNamesContext, type Fork, type SubAgentNames } from './transcript-context.ts';

/** Within this many pixels of the bottom the view follows new content. */
const FOLLOW_SLACK = 120;

/**
 * The transcript. `version` is the model's (a change to draw); `pin` moves when the user sends a
 * message: the view then goes to the bottom and follows again, however far they had scrolled.
 * Whether the reader is following is decided when they scroll, not on every render; following
 * watches sizes (a ResizeObserver on the list and the view), so it reads the layout only after
 * the browser laid it out anyway — however the content grew (a render, or a streamed answer's
 * blocks drawn over several frames).
 */
export function Transcript({ model, version, pin = 0 }: { model: TranscriptModel; version: number; pin?: number }) {
  const ref = useRef<HTMLElement>(null);
  const list = useRef<HTMLOListElement>(null);
  const follow = useRef(true);
  /** Where the view last put the scroll position: a scroll event above it is the reader's. */
  const placed = useRef(0);
  const pinned = useRef(pin);
  const [behind, setBehind] = useState(false);
  // Streamed text changes the model alone: the transcript draws it, once per frame.
  const [drawn, setDrawn] = useState(0);
  useEffect(() => {
    const draw = perFrame(() => setDrawn(model.version));
    model.onChange = draw.request;
    return () => {
      draw.cancel();
      model.onChange = () => {};
    };
  }, [model]);
  const toBottom = (el: HTMLElement) => {
    el.scrollTop = el.scrollHeight;
    placed.current = el.scrollTop;
  };
  useEffect(() => {
    const el = ref.current;
    if (!el || !list.current) return;
    const sizes = new ResizeObserver(() => {
      if (follow.current) toBottom(el);
    });
    sizes.observe(el);
    sizes.observe(list.current);
    return () => sizes.disconnect();
  }, []);
  useLayoutEffect(() => {
    const el = ref.current;
    if (!el) return;
    if (pin !== pinned.current) {
      pinned.current = pin;
      follow.current = true;
      toBottom(el);
    }
    // Something changed while the reader is up: the way down shows.
    setBehind(!follow.current);
  }, [version, drawn, pin]);
  const onScroll = () => {
    const el = ref.current;
    if (!el) return;
    if (el.scrollHeight - el.scrollTop - el.clientHeight < FOLLOW_SLACK) {
      follow.current = true;
      placed.current = el.scrollTop;
      setBehind(false);
    } else if (el.scrollTop < placed.current - 2) follow.current = false;
  };
  const items = model.items;
  return (
    <div class="transcript-wrap">
      <section class="transcript" role="log" aria-label="Messages" aria-live="polite" tabIndex={0} ref={ref} onScroll={onScroll}>
        {items.length === 0 ? <p class="transcript-empty">No messages yet. Ask the agent something below.</p> : null}
        <ol class="transcript-list" ref={list}>
          {items.map((item) => (
            <ItemView key={item.key} item={item} rev={item.rev} />
          ))}
        </ol>
      </section>
      {/* Below the transcript, not over it: the transcript gives up a line while it shows. */}
      {behind ? (
        <button
          type="button"
          class="jump small"
          onClick={() => {
            const el = ref.current;
            follow.current = true;
            if (el) toBottom(el);
            setBehind(false);
          }}
        >
          ↓ Latest
        </button>
      ) : null}
    </div>
  );
}

const ItemView = memo(
  function ItemView({ item }: { item: Item; rev: number }) {
    switch (item.kind) {
      case 'user':
        return <UserMessage item={item} />;
      case 'agent':
        return <Answer answer={item} />;
      case 'notice':
        return (
          <li
            class={`notice notice-${item.tone}`}
            data-type={item.type === 'system' || item.type === 'error' ? item.type : undefined}
            data-kind={item.type}
            role={item.type === 'error' ? 'alert' : undefined}
          >
            {item.text}
          </li>
        );
      case 'continuation':
        return (
          <li class="continuation" data-type="continuation">
            <h3>Continuation summary</h3>
            <div class="msg-body">
              <Markdown text={item.text} />
            </div>
          </li>
        );
      case 'subagent':
        return <SubAgentCard item={item} />;
    }
  },
  (a, b) => a.item === b.item && a.rev === b.rev,
);

function SubAgentCard({ item }: { item: Item & { kind: 'subagent' } }) {
  const names = useContext(SubAgentNamesContext);
  const p = item.progress;
  const title = names.titles.get(p.subAgentId) || p.task.split('\n')[0]!.trim() || 'Sub-agent';
  const finished = p.state === StateKind.COMPLETED || p.state === StateKind.FAILED;
  const status = finished ? (p.success ? 'done' : 'failed') : 'working';
  const href = `/c/${encodeURIComponent(p.subAgentId)}`;
  return (
    <li class="notice notice-info subagent" data-kind="subagent" data-sub-agent={p.subAgentId}>
      <div class="subagent-head">
        <span class={`badge badge-${status === 'done' ? 'ok' : status === 'failed' ? 'error' : 'running'}`}>{status}</span>
        {/* Its own conversation, watchable like any other; its header links back here. */}
        <a class="subagent-title" href={href} data-link>
          {title}
        </a>
        <span class="subagent-count">
          {p.finishedCount} of {p.totalCount} sub-agents finished
        </span>
      </div>
      <div class="subagent-task">{p.task}</div>
      {p.result ? (
        <div class="output-wrap">
          <pre class="tool-output">{p.result}</pre>
          <CopyButton text={() => p.result} label="Copy the sub-agent's result" />
        </div>
      ) : null}
      <a class="subagent-open" href={href} data-link>
        Open its transcript<span class="visually-hidden"> ({title})</span>
      </a>
    </li>
  );
}

function UserMessage({ item }: { item: Item & { kind: 'user' } }) {
  const fork = useForkAction(item.forkAt);
  const rewind = useRewindAction(item.forkAt);
  return (
    <li class="msg msg-user" data-sequence={String(item.forkAt)}>
      <div class="msg-who">
        <span>You</span>
        <RelativeTime at={item.at} />
        {fork.button}
        {rewind.button}
      </div>
      <div class="msg-body">
        {item.blocks.map((b, i) => (
          <UserBlock key={i} block={b} />
        ))}
      </div>
      {fork.error}
      {rewind.panel}
    </li>
  );
}

/**
 * "Fork from here" and "Fork with files" for a message at rest (`at`: the last message the fork
 * copies): the buttons for the message's head line, and the service's refusal to show under the
 * message (a fork with files where the workspace has no checkpoints says why).
 */
function useForkAction(at: bigint | undefined): { button: ComponentChildren; error: ComponentChildren } {
  const fork = useContext(ForkContext);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const mounted = useRef(true);
  useEffect(
    () => () => {
      mounted.current = false;
    },
    [],
  );
  if (!fork || at === undefined) return { button: null, error: null };
  const errorId = `fork-error-${at}`;
  const run = async (withFiles: boolean) => {
    setBusy(true);
    setError('');
    const outcome = await fork(at, withFiles);
    // On success the fork opens and this view goes away.
    if (!mounted.current) return;
    setBusy(false);
    if (!outcome.ok) setError(outcome.message);
  };
  return {
    button: (
      <>
        <button
          type="button"
          class="fork-button small"
          disabled={busy}
          aria-describedby={error ? errorId : undefined}
          title="Start a new conversation with the history up to this message"
          onClick={() => void run(false)}
        >
          {busy ? 'Forking…' : 'Fork from here'}
        </button>
        <button
          type="button"
          class="fork-button fork-files-button small"
          disabled={busy}
          aria-describedby={error ? errorId : undefined}
          title="Start a new conversation with the history up to this message and its own copy of the files as they were then"
          onClick={() => void run(true)}
        >
          Fork with files
        </button>
      </>
    ),
    error: error ? (
      <p class="form-error fork-error" id={errorId} role="alert">
        {error}
      </p>
    ) : null,
  };
}

function UserBlock({ block }: { block: ContentBlock }) {
  const image = block.block.case === 'image' ? block.block.value : undefined;
  const url = useMemo(() => (image ? URL.createObjectURL(new Blob([image.data.slice()], { type: image.mediaType })) : ''), [image]);
  useEffect(() => () => (url ? URL.revokeObjectURL(url) : undefined), [url]);
  if (block.block.case === 'text') return <p class="text">{block.block.value.text}</p>;
  if (image)
    return (
      <a href={url} target="_blank" rel="noopener" class="thumb-link">
        <img class="thumb" src={url} alt="Attached image" />
      </a>
    );
  return null;
}

function Answer({ answer }: { answer: AgentItem }) {
  const sources = answer.sources.sources;
  const fork = useForkAction(answer.forkAt);
  const rewind = useRewindAction(answer.forkAt);
  return (
    <li
      class={answer.streaming ? 'msg msg-agent msg-streaming' : 'msg msg-agent'}
      aria-busy={answer.streaming ? 'true' : undefined}
      data-stop={answer.marker?.stop || undefined}
      data-sequence={answer.forkAt?.toString()}
    >
      <div class="msg-who">
        <span>Agent</span>
        {answer.streaming ? <span class="typing" aria-hidden="true" /> : null}
        <RelativeTime at={answer.at} />
        {fork.button}
        {rewind.button}
      </div>
      {answer.parts.map((p) => (
        <PartView key={p.key} part={p} rev={partRev(p)} />
      ))}
      {sources.length ? (
        <ol class="sources" aria-label="Sources">
          {sources.map((s, i) => (
            <li key={i}>
              <SourceLink source={s} />
            </li>
          ))}
        </ol>
      ) : null}
      {answer.marker ? (
        <p
          class="stop-marker"
          data-stop={answer.marker.stop}
          data-type={answer.marker.error ? 'error' : undefined}
          role={answer.marker.role}
        >
          {answer.marker.text}
        </p>
      ) : null}
      {answer.usageText ? <p class="msg-usage">{answer.usageText}</p> : null}
      {fork.error}
      {rewind.panel}
    </li>
  );
}

function partRev(p: Part): number {
  return p.kind === 'tool' || p.kind === 'server-tool' ? p.card.rev : p.kind === 'live' ? p.live.rev : 0;
}

const PartView = memo(
  function PartView({ part }: { part: Part; rev: number }) {
    switch (part.kind) {
      case 'text':
        // The same component as the live part it replaces (and under its key): what streamed stays as drawn.
        return <AgentBody text={part.text} />;
      case 'cited':
        return (
          <div class="msg-body">
            <p class="text">
              {part.pieces.map((piece, i) =>
                typeof piece === 'string' ? (
                  piece
                ) : (
                  <sup class="cite" key={i}>
                    {piece.source.url ? (
                      <a href={piece.source.url} target="_blank" rel="noopener noreferrer" title={piece.source.title}>
                        [{piece.n}]
                      </a>
                    ) : (
                      `[${piece.n}]`
                    )}
                  </sup>
                ),
              )}
            </p>
          </div>
        );
      case 'thinking':
        return (
          <details class="thinking">
            <summary>{part.summary}</summary>
            <div class="thinking-text">{part.text}</div>
          </details>
        );
      case 'thinking-note':
        return <p class="thinking-note">{part.text}</p>;
      case 'compaction':
        return part.text.trim() ? (
          <details class="thinking compaction">
            <summary>{part.summary}</summary>
            <div class="thinking-text">{part.text}</div>
          </details>
        ) : (
          <p class="thinking-note compaction">{part.summary}</p>
        );
      case 'tool':
        return <ToolCardView card={part.card} />;
      case 'server-tool':
        return <ServerTool card={part.card} />;
      case 'live':
        return <AgentBody live={part.live} />;
    }
  },
  (a, b) => a.part === b.part && a.rev === b.rev,
);

/**
 * The agent's text: streaming (`live`: the provider's compaction and the thinking collapsed, left
 * open or closed as the user chose, then the text) or stored (`text`, with a sub-agent it names
 * by id named by its title). One component for both, so when the stored answer replaces the
 * stream the same elements stay: only the last block is drawn again.
 */
function AgentBody({ live, text = '' }: { live?: Live; text?: string }) {
  const names = useContext(SubAgentNamesContext);
  const shown = live ? joinBlocks(live.text) : withSubAgentTitles(text, names.parentId, names.titles);
  return (
    <>
      {live?.compaction.size ? (
        <details class="thinking compaction thinking-live" key="compaction">
          <summary>{COMPACTING}</summary>
          <div class="thinking-text">{joinBlocks(live.compaction)}</div>
        </details>
      ) : null}
      {live?.thinking.size ? (
        <details class="thinking thinking-live" key="thinking">
          <summary>Thinking…</summary>
          <div class="thinking-text">{joinBlocks(live.thinking)}</div>
        </details>
      ) : null}
      <BlockMarkdown key="body" text={shown} done={!live} />
    </>
  );
}
