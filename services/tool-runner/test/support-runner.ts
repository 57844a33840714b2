/** Starts a real tool-runner for integration tests (ephemeral ports, quiet logs). */
import { createClient } from '@connectrpc/connect';
import type { Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { ToolRunnerService } from '@bedrock/contracts';
import type { Transport } from '@bedrock/platform';
import { createLogger, generateServiceCredentials, serviceTokenInterceptor } from '@bedrock/platform/server';
import { readToolRunnerConfig } from '../src/config.ts';
import type { ToolRunnerConfigOverrides } from '../src/config.ts';
import { createToolRunner } from '../src/create-tool-runner.ts';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { ensureHelper, TEST_WORKSPACE_ROOT } from './support.ts';

/**
 * Service identity of the test runners: they accept these services' tokens (grpcClient
 * presents the `conversation` one unless told otherwise).
 */
export const TEST_SERVICES = generateServiceCredentials(['conversation', 'web-bff']);

/** A runner on the defaults (not the environment), on loopback and ephemeral ports, gRPC only unless `overrides` say so. */
export async function startTestRunner(overrides: ToolRunnerConfigOverrides = {}, transport?: Transport): Promise<ToolRunner> {
  ensureHelper();
  const config = readToolRunnerConfig(
    {},
    {
      ...overrides,
      runner: { id: `test-runner-${process.pid}-${Math.random().toString(36).slice(2, 8)}`, consume: false, ...overrides.runner },
      server: { host: '127.0.0.1', grpcPort: 0, metricsPort: 0, shutdownGrace: 2000, ...overrides.server },
      output: { flushInterval: 20, ...overrides.output },
      // Never the machine's /var/lib/bedrock/workspaces.
      workspaces: { root: TEST_WORKSPACE_ROOT, ...overrides.workspaces },
    },
  );
  const runner = createToolRunner(config, {
    logger: createLogger({ service: 'tool-runner', level: 'silent' }),
    servicePeers: TEST_SERVICES.peers,
    ...(transport ? { transport } : {}),
  });
  await runner.start();
  return runner;
}

/** A client of the runner's ToolRunnerService presenting `token` (default a listed peer's; `null` sends none). */
export function grpcClient(
  runner: ToolRunner,
  token: string | null = TEST_SERVICES.tokens.conversation!,
): Client<typeof ToolRunnerService> {
  return createClient(
    ToolRunnerService,
    createGrpcTransport({ baseUrl: runner.grpcUrl, interceptors: token === null ? [] : [serviceTokenInterceptor(token)] }),
  );
}

/** Waits until process group `pgid` has no process left (all reaped), up to `ms`. */
export async function groupGone(pgid: number, ms = 2000): Promise<boolean> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      process.kill(-pgid, 0);
    } catch {
      return true;
    }
    if (Date.now() > deadline) return false;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}
