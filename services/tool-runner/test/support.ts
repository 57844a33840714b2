/** Shared by the tool-runner tests: the real helper, real sandbox settings, temp dirs. */
import { execFileSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_HELPER_PATH, readToolRunnerConfig } from '../src/config.ts';
import type { LimitsConfig, SandboxConfig } from '../src/config.ts';
import type { ResourceLimits } from '../src/sandbox/limits.ts';
import { createSandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import type { SandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import { DEFAULT_SNAPSHOT_HELPER_PATH } from '../src/workspaces/snapshot-helper.ts';
import type { ExecuteContext } from '../src/tools/job-context.ts';

const packageDir = new URL('..', import.meta.url).pathname;

/** Builds the helper when a test run starts without `npm run build`. */
export function ensureHelper(): string {
  if (!existsSync(DEFAULT_HELPER_PATH) || !existsSync(DEFAULT_SNAPSHOT_HELPER_PATH))
    execFileSync('npm', ['run', 'build'], { cwd: packageDir, stdio: 'ignore' });
  return DEFAULT_HELPER_PATH;
}

/**
 * Sandbox settings of a test runner: the runner's defaults (tool user 65534, pids cgroup `auto`,
 * the default limits) with the tests' scratch root, no denied ports or hidden paths unless
 * asked for, and `overrides`.
 */
export async function testSandboxSettings(
  overrides: Partial<
    Pick<SandboxConfig, 'pidsCgroup' | 'unrestrictedWrite' | 'denyPorts' | 'hidePaths' | 'toolUid' | 'scratchSize' | 'viewPaths'>
  > & {
    limits?: { [M in keyof LimitsConfig]?: Partial<ResourceLimits> };
    /** Where this runner's workspaces are (default TEST_WORKSPACE_ROOT). */
    workspaceRoot?: string;
  } = {},
): Promise<SandboxSettings> {
  const { limits, workspaceRoot, ...sandbox } = overrides;
  const config = readToolRunnerConfig(
    {},
    { sandbox: { helper: ensureHelper(), scratchRoot: TEST_SCRATCH_ROOT, denyPorts: [], hidePaths: [], ...sandbox }, limits },
  );
  const { settings } = await createSandboxSettings({
    runnerId: `test-${process.pid}-${Math.random().toString(36).slice(2, 8)}`,
    sandbox: config.sandbox,
    limits: config.limits,
    workspaces: { ...config.workspaces, root: workspaceRoot ?? TEST_WORKSPACE_ROOT },
  });
  return settings;
}

export function executeContext(sandbox: SandboxSettings, signal = new AbortController().signal): ExecuteContext {
  return { sandbox, signal, capture: { headBytes: 50_000, tailBytes: 50_000 } };
}

/** The runner's default tool user; a workspace must be usable by it, as a deployment's would be. */
export const TOOL_UID = 65534;

/** Scratch root of the tests' runners (never a parent of a working directory). */
export const TEST_SCRATCH_ROOT = join(tmpdir(), 'bedrock-scratch-test');

/** A working directory owned by the tool user (when the tests run as root, as CI does). */
/** The workspace root of test runners and test sandbox settings: never the machine's /var/lib/bedrock/workspaces. */
export const TEST_WORKSPACE_ROOT = join(tmpdir(), 'bedrock-workspaces-test');

/** A workspace directory under TEST_WORKSPACE_ROOT (ROOT/ws-…), as the storage makes them. */
export function testWorkspace(): { path: string; remove(): void } {
  mkdirSync(TEST_WORKSPACE_ROOT, { recursive: true, mode: 0o711 });
  const path = mkdtempSync(join(TEST_WORKSPACE_ROOT, 'ws-'));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}

export function tempDir(prefix = 'bedrock-tr-test-'): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  if (process.getuid?.() === 0) chownSync(path, TOOL_UID, TOOL_UID);
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
