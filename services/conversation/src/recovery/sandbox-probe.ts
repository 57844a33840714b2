import type { RunnerRegistry } from '@bedrock/platform';

/** How long one answer from the runner registry is reused, ms. */
const CACHE_MS = 2000;

/**
 * Whether Restricted mode exists for a new conversation: some tool-runner reported a working
 * sandbox (REQ-BED-014; docs/design.md, "Resolution 1: sub-agents are Restricted whenever the
 * sandbox exists"). `available`/`unavailable` let an operator force it.
 */
export function createSandboxProbe(mode: 'auto' | 'available' | 'unavailable', runners: RunnerRegistry): () => Promise<boolean> {
  if (mode !== 'auto') return async () => mode === 'available';
  let cached: { at: number; value: boolean } | null = null;
  return async () => {
    if (cached && Date.now() - cached.at < CACHE_MS) return cached.value;
    const value = (await runners.list()).some((r) => r.sandboxAvailable);
    cached = { at: Date.now(), value };
    return value;
  };
}
