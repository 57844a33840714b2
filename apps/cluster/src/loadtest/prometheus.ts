/**
 * Reading histograms out of Prometheus text exposition, enough for the load test: the buckets
 * of one family filtered by labels, summed over series and replicas, and a quantile of the
 * difference between two scrapes, interpolated inside a bucket as PromQL's histogram_quantile
 * does. Hand-written (40 lines) because the npm parsers of this format are unmaintained.
 */

/** Cumulative bucket counts by upper bound (`+Inf` as Infinity). */
export type Buckets = Map<number, number>;

const LINE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\}\s+(\S+)/;

function labelsOf(text: string): Map<string, string> {
  return new Map([...text.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1]!, m[2]!]));
}

/** The `<family>_bucket` series of `text` whose labels include `match`, summed per bound. */
export function histogramBuckets(text: string, family: string, match: Readonly<Record<string, string>> = {}): Buckets {
  const buckets: Buckets = new Map();
  for (const line of text.split('\n')) {
    const m = LINE.exec(line);
    if (!m || m[1] !== `${family}_bucket`) continue;
    const labels = labelsOf(m[2]!);
    if (Object.entries(match).some(([k, v]) => labels.get(k) !== v)) continue;
    const le = labels.get('le');
    if (le === undefined) continue;
    const bound = le === '+Inf' ? Infinity : Number(le);
    buckets.set(bound, (buckets.get(bound) ?? 0) + Number(m[3]));
  }
  return buckets;
}

/** `a + b` per bound (replicas of one service). */
export function addBuckets(a: Buckets, b: Buckets): Buckets {
  const sum: Buckets = new Map(a);
  for (const [bound, count] of b) sum.set(bound, (sum.get(bound) ?? 0) + count);
  return sum;
}

/** `after - before` per bound: what was observed between two scrapes. */
export function bucketDelta(after: Buckets, before: Buckets): Buckets {
  return new Map([...after].map(([bound, count]) => [bound, count - (before.get(bound) ?? 0)]));
}

/** Observations in `buckets` (the `+Inf` bucket). */
export function observations(buckets: Buckets): number {
  return buckets.get(Infinity) ?? 0;
}

/**
 * The `q` quantile (0..1) of cumulative `buckets`, linearly interpolated inside its bucket;
 * undefined with no observations. Past the last finite bound it answers that bound (as PromQL).
 */
export function quantile(buckets: Buckets, q: number): number | undefined {
  const bounds = [...buckets.keys()].sort((a, b) => a - b);
  const total = observations(buckets);
  if (total <= 0) return undefined;
  const rank = q * total;
  let lowerBound = 0;
  let lowerCount = 0;
  for (const bound of bounds) {
    const count = buckets.get(bound)!;
    if (count >= rank) {
      if (bound === Infinity) return lowerBound;
      const inBucket = count - lowerCount;
      return inBucket <= 0 ? bound : lowerBound + ((bound - lowerBound) * (rank - lowerCount)) / inBucket;
    }
    lowerBound = bound;
    lowerCount = count;
  }
  return lowerBound;
}
