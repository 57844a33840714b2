/** The transcript's cards for tools: a tool call with its input, live output and result (output or diff), the provider's web search and fetch, and a source as a link. */
import type { Source } from '@bedrock/agent-view/agent-content';
import { diffLines, toolLabel } from '@bedrock/agent-view/format';
import { useContext, useLayoutEffect, useRef } from 'preact/hooks';
import { CopyButton } from './copy.tsx';
import { lineCount } from './text.ts';
import { subAgentPieces } from './titles.ts';
import { SubAgentNamesContext } from './transcript-context.ts';
import type { ServerToolCard, ToolCard } from './transcript-items.ts';

/** Results longer than this many lines start folded. */
const FOLD_LINES = 24;

const BADGE_WORDS: Record<ToolCard['status'], string> = {
  waiting: 'waiting',
  running: 'running…',
  ok: 'done',
  error: 'error',
  cancelled: 'cancelled',
};

export function ToolCardView({ card }: { card: ToolCard }) {
  const liveRef = useRef<HTMLPreElement>(null);
  useLayoutEffect(() => {
    const el = liveRef.current;
    if (el) el.scrollTop = el.scrollHeight;
  }, [card.live]);
  const r = card.result;
  return (
    <article class={`tool${r?.isError ? ' tool-error' : ''}`} data-tool={card.name} data-tool-id={card.id} data-status={card.status}>
      <header class="tool-head">
        <span class="tool-name" title={card.name}>
          {toolLabel(card.name)}
        </span>
        {card.summary ? <code class="tool-summary">{card.summary}</code> : null}
        <span class={`badge badge-${card.status}`}>{BADGE_WORDS[card.status]}</span>
      </header>
      {card.input !== undefined ? (
        <details class="tool-input">
          <summary>Input</summary>
          <pre>{card.input}</pre>
        </details>
      ) : null}
      {card.live && !r ? (
        <pre class="tool-output tool-live" aria-label="Live output" ref={liveRef}>
          {card.live}
        </pre>
      ) : null}
      <div class="tool-result">
        {r?.patch ? <Diff {...r.patch} /> : null}
        {/* A cancelled tool's result is what it had printed, then the marker: output, not an error (the badge says cancelled). */}
        {r?.output !== undefined ? <Output text={r.output} error={r.isError && card.status !== 'cancelled'} /> : null}
      </div>
    </article>
  );
}

function Output({ text, error }: { text: string; error: boolean }) {
  const names = useContext(SubAgentNamesContext);
  // Lines as a person counts them: a trailing newline ends the last line, it does not start one.
  const lines = lineCount(text);
  const body = (
    <div class="output-wrap">
      <pre class={error ? 'tool-output output-error' : 'tool-output'}>
        {subAgentPieces(text, names.parentId, names.titles).map((piece, i) =>
          typeof piece === 'string' ? (
            piece
          ) : (
            <a key={i} class="subagent-link" href={`/c/${encodeURIComponent(piece.id)}`} data-link title="Open this sub-agent's transcript">
              {piece.title}
            </a>
          ),
        )}
      </pre>
      <CopyButton text={() => text} label="Copy output" />
    </div>
  );
  if (lines <= FOLD_LINES) return body;
  return (
    <details class="fold">
      <summary>Output ({lines} lines)</summary>
      {body}
    </details>
  );
}

function Diff({ diff, path, created }: { diff: string; path: string; created: boolean }) {
  return (
    <figure class="diff">
      <figcaption>{created ? `Created ${path}` : `Changed ${path}`}</figcaption>
      <pre class="diff-body" aria-label={`Diff of ${path}`}>
        {diffLines(diff).map((l, i) => (
          <span key={i} class={`diff-line diff-${l.kind}`}>
            {l.text || ' '}
          </span>
        ))}
      </pre>
    </figure>
  );
}

export function ServerTool({ card }: { card: ServerToolCard }) {
  return (
    <div class={`server-tool${card.kind === 'other' ? ' server-tool-other' : ''}`} data-server-tool={card.kind}>
      {card.kind === 'result' ? null : card.fetched ? (
        <p class="server-tool-head">
          Fetched <SourceLink source={card.fetched} />
        </p>
      ) : (
        <p class="server-tool-head">{card.line}</p>
      )}
      {card.results.map((r, i) =>
        r.kind === 'search-results' ? (
          <details class="server-results" key={i}>
            <summary>{r.line}</summary>
            <ol>
              {r.results.map((s, j) => (
                <li key={j}>
                  <SourceLink source={s} />
                </li>
              ))}
            </ol>
          </details>
        ) : r.kind === 'fetch-result' ? (
          <p class="server-result" key={i}>
            Read: <SourceLink source={r.source} />
          </p>
        ) : (
          <p class="server-result server-error" data-status="error" key={i}>
            {r.line}
          </p>
        ),
      )}
    </div>
  );
}

/** A source as a link that opens apart (plain text when it has no http(s) address). */
export function SourceLink({ source }: { source: Source }) {
  if (!source.url) return <span class="source">{source.title}</span>;
  return (
    <a class="source" href={source.url} target="_blank" rel="noopener noreferrer">
      {source.title}
    </a>
  );
}
