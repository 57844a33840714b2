import { hostname } from 'node:os';
import { create } from '@bufbuild/protobuf';
import { RunnerCapabilitiesSchema } from '@bedrock/contracts';
import type { RunnerCapabilities } from '@bedrock/contracts';
import type { SandboxProbe } from './sandbox/probe.ts';

/** What this runner reports: it takes Restricted work only when its sandbox works. */
export function runnerCapabilities(runnerId: string, probe: SandboxProbe, queues: readonly string[], now = Date.now()): RunnerCapabilities {
  return create(RunnerCapabilitiesSchema, {
    runnerId,
    sandboxAvailable: probe.sandboxAvailable,
    landlockAbi: probe.landlockAbi,
    seccompAvailable: probe.seccompAvailable,
    queues: [...queues],
    reportedAtMs: BigInt(now),
    hostname: hostname(),
  });
}
