/** Small helpers for the benchmarks and the load generator. */

/** The q-quantile (0..1) of `values` by nearest rank. */
export function quantile(values: readonly number[], q: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
  return sorted[rank] as number;
}

export function fmtMs(ms: number): string {
  return Number.isNaN(ms) ? '-' : ms < 10 ? `${ms.toFixed(2)} ms` : `${ms.toFixed(1)} ms`;
}

export function summary(values: readonly number[]): string {
  return `n=${values.length} median ${fmtMs(quantile(values, 0.5))}  p90 ${fmtMs(quantile(values, 0.9))}  p99 ${fmtMs(quantile(values, 0.99))}  max ${fmtMs(quantile(values, 1))}`;
}
