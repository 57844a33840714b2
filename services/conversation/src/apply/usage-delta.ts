/** The usage one transition added: the arithmetic opposite of core/usage.ts's `addUsage`. */
import type { Usage } from '../core/types.ts';
import { ZERO_USAGE } from '../core/usage.ts';

const COUNTS = Object.keys(ZERO_USAGE) as (keyof Usage)[];

/** `after` − `before`, for every count ZERO_USAGE names; a count absent from one side counts as 0. */
export function subtractUsage(after: Usage, before: Usage): Usage {
  const delta: { -readonly [K in keyof Usage]: Usage[K] } = { ...ZERO_USAGE };
  for (const key of COUNTS) delta[key] = (after[key] ?? 0) - (before[key] ?? 0);
  return delta;
}
