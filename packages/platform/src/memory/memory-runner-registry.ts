/** In-process runner registry: capabilities with a deadline, forgotten once it passes. */
import { fromBinary, toBinary } from '@bufbuild/protobuf';
import { RunnerCapabilitiesSchema } from '@bedrock/contracts';
import type { RunnerCapabilities } from '@bedrock/contracts';
import type { RunnerRegistry } from '../interfaces.ts';

export function createMemoryRunnerRegistry(): RunnerRegistry {
  const runners = new Map<string, { bytes: Uint8Array; expiresAt: number }>();

  function prune(now: number): void {
    for (const [id, runner] of runners) if (runner.expiresAt <= now) runners.delete(id);
  }

  return {
    async report(capabilities: RunnerCapabilities, ttlMs: number): Promise<void> {
      if (capabilities.runnerId === '') throw new Error('runner id must not be empty');
      runners.set(capabilities.runnerId, {
        bytes: toBinary(RunnerCapabilitiesSchema, capabilities),
        expiresAt: Date.now() + ttlMs,
      });
    },
    async list(): Promise<RunnerCapabilities[]> {
      prune(Date.now());
      return [...runners.values()].map((runner) => fromBinary(RunnerCapabilitiesSchema, runner.bytes));
    },
    async remove(runnerId: string): Promise<void> {
      runners.delete(runnerId);
    },
    async close(): Promise<void> {
      runners.clear();
    },
  };
}
