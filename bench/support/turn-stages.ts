/**
 * Where a tool's time goes, read from the product's own traces (docs/observability.md,
 * "Tracing"): for every `execute_tool` span, the queue hops and the work on either side of it,
 * from the times of the spans around it. The pipeline benchmark prints these with
 * BENCH_STAGES=1 (tracing on in every process, so the turn figures then include its cost).
 */
import type { ReceivedSpan } from '@bedrock/testkit/otlp-receiver';

/** The stages of one tool, in the order they happen (the cycle repeats for the next tool). */
export const STAGES = [
  'conversation: event taken → tool job sent (read, decide, write)',
  'tool job sent → runner has it (the queue hop)',
  'runner: job taken → tool span starts',
  'runner: tool span (claim, sandbox helper, command)',
  'runner: tool span ends → result sent',
  'result sent → conversation has it (the queue hop)',
] as const;
export type Stage = (typeof STAGES)[number];

/** Each stage's durations in ms, one per tool found whole in the spans; `traceIds` limits it to those traces. */
export function toolStages(spans: readonly ReceivedSpan[], traceIds?: ReadonlySet<string>): Map<Stage, number[]> {
  const mine = traceIds ? spans.filter((s) => traceIds.has(s.traceId)) : spans;
  const byId = new Map(mine.map((s) => [s.spanId, s]));
  const children = new Map<string, ReceivedSpan[]>();
  for (const s of mine) {
    const list = children.get(s.parentSpanId);
    if (list) list.push(s);
    else children.set(s.parentSpanId, [s]);
  }
  const child = (parent: ReceivedSpan, name: RegExp) => children.get(parent.spanId)?.find((s) => name.test(s.name));
  const out = new Map<Stage, number[]>(STAGES.map((stage) => [stage, []]));
  const add = (stage: Stage, ms: number) => out.get(stage)!.push(ms);
  for (const tool of mine) {
    if (!tool.name.startsWith('execute_tool ')) continue;
    // process tool-exec ← send tool-exec ← process conversation-events (the event that decided it)
    const taken = byId.get(tool.parentSpanId);
    const sent = taken && byId.get(taken.parentSpanId);
    const decided = sent && byId.get(sent.parentSpanId);
    // The result: send conversation-events under the runner's job, processed by the conversation service.
    const resultSent = taken && child(taken, /^send conversation-events$/);
    const resultTaken = resultSent && child(resultSent, /^process conversation-events$/);
    if (!taken || !sent || !decided || !resultSent || !resultTaken || !/^process conversation-events$/.test(decided.name)) continue;
    add(STAGES[0], sent.startMs - decided.startMs);
    add(STAGES[1], taken.startMs - sent.startMs);
    add(STAGES[2], tool.startMs - taken.startMs);
    add(STAGES[3], tool.endMs - tool.startMs);
    add(STAGES[4], resultSent.startMs - tool.endMs);
    add(STAGES[5], resultTaken.startMs - resultSent.startMs);
  }
  return out;
}

/** The traces of the turns of these conversations (their `invoke_agent` spans name them). */
export function tracesOf(spans: readonly ReceivedSpan[], conversationIds: ReadonlySet<string>): Set<string> {
  const ids = new Set<string>();
  for (const s of spans) if (s.name === 'invoke_agent' && conversationIds.has(String(s.attributes['gen_ai.agent.id']))) ids.add(s.traceId);
  return ids;
}

const sorted = (xs: readonly number[]) => [...xs].sort((a, b) => a - b);
const quantile = (xs: readonly number[], p: number) => {
  const s = sorted(xs);
  return s.length ? s[Math.min(s.length - 1, Math.floor(p * s.length))]! : NaN;
};
/**
 * The mean of the middle 80%. The SDK dates a span's start by `Date.now()` (whole ms; its
 * duration is exact), so a difference of two starts is off by up to 1 ms either way: its median
 * jumps by whole ms, while the mean of many averages the rounding out.
 */
const trimmedMean = (xs: readonly number[]) => {
  const s = sorted(xs);
  const cut = Math.floor(s.length / 10);
  const mid = s.slice(cut, s.length - cut);
  return mid.length ? mid.reduce((a, b) => a + b, 0) / mid.length : NaN;
};

/** Lines of a table: each stage's trimmed mean and p90 for each column, and the sum of the means. */
export function stageTable(columns: readonly { readonly name: string; readonly stages: Map<Stage, number[]> }[]): string[] {
  const width = Math.max(...STAGES.map((s) => s.length));
  const lines = [`  ${'stage (mean of the middle 80% / p90, ms)'.padEnd(width)}  ${columns.map((c) => c.name.padStart(22)).join('')}`];
  for (const stage of STAGES) {
    const cells = columns.map((c) => {
      const xs = c.stages.get(stage) ?? [];
      return `${trimmedMean(xs).toFixed(2)} / ${quantile(xs, 0.9).toFixed(2)}`.padStart(22);
    });
    lines.push(`  ${stage.padEnd(width)}  ${cells.join('')}`);
  }
  const sums = columns.map((c) => STAGES.reduce((sum, stage) => sum + trimmedMean(c.stages.get(stage) ?? []), 0));
  lines.push(`  ${'sum: one tool, end to end'.padEnd(width)}  ${sums.map((x) => x.toFixed(2).padStart(22)).join('')}`);
  lines.push(
    `  ${'tools found whole in the traces'.padEnd(width)}  ${columns.map((c) => String(c.stages.get(STAGES[3])?.length ?? 0).padStart(22)).join('')}`,
  );
  return lines;
}
