import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { Mode } from '@bedrock/contracts';
import { executeTool } from '../tools/execute-tool.ts';
import type { ToolOutcome } from '../tools/tool-types.ts';
import type { SandboxSettings } from './sandbox-settings.ts';
import { closeSandboxSettings } from './sandbox-settings.ts';
import { ensureHelper, executeContext, tempDir, testSandboxSettings } from '../../test/support.ts';

let sandbox: SandboxSettings;
const dir = tempDir('bedrock-warm-');
const LIMIT = 24;

beforeAll(async () => {
  sandbox = await testSandboxSettings({ limits: { restricted: { processes: LIMIT }, unrestricted: { processes: LIMIT } } });
});
afterAll(async () => {
  dir.remove();
  if (sandbox) await closeSandboxSettings(sandbox);
});

function bash(command: string, mode = Mode.RESTRICTED, timeoutSeconds?: number): Promise<ToolOutcome> {
  const input = timeoutSeconds ? { command, timeout_seconds: timeoutSeconds } : { command };
  return executeTool({ toolName: 'bash', inputJson: JSON.stringify(input), cwd: dir.path, mode }, executeContext(sandbox));
}

/** The run's own pids cgroup, as seen from inside. */
const CGROUP = 'c=$(grep -E "^[0-9]+:pids:" /proc/self/cgroup | cut -d: -f3); echo "$c"; cat "/sys/fs/cgroup/pids$c/pids.max"';

async function waitFor(check: () => boolean, ms = 3000): Promise<boolean> {
  const until = Date.now() + ms;
  while (!check()) {
    if (Date.now() > until) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}

function waiting(base: string): string[] {
  return readdirSync(base).filter((n) => n.startsWith('warm-'));
}

function procs(base: string, name: string): number[] {
  try {
    return readFileSync(join(base, name, 'cgroup.procs'), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** At least `n` helpers waiting, each inside its cgroup by now, and handed to the pool (through the spawner, their pipes come after). */
function helpersWaiting(base: string, n: number): boolean {
  const names = waiting(base);
  return names.length >= n && names.every((name) => procs(base, name).length === 1) && (sandbox.warmHelpers?.waitingCount() ?? 0) >= n;
}

describe('helpers started ahead in their own pids cgroup', () => {
  it('give every run a fresh cgroup of its own, with its own limit, removed after the run', async () => {
    if (!sandbox.cgroups || !sandbox.warmHelpers || !existsSync('/sys/fs/cgroup/pids')) return; // no writable v1 pids hierarchy here
    const base = sandbox.cgroups.base;
    const seen = new Set<string>();
    await bash('true'); // the pool fills after the first run
    for (const mode of [Mode.RESTRICTED, Mode.UNRESTRICTED, Mode.RESTRICTED]) {
      expect(await waitFor(() => helpersWaiting(base, 2))).toBe(true);
      const r = await bash(`${CGROUP}; ls -A "$TMPDIR" "$HOME"; touch "$TMPDIR/left-behind"`, mode);
      const [path, max] = r.content.split('\n');
      expect(path).toMatch(/\/warm-\d+-\d+$/);
      expect(seen.has(path as string)).toBe(false);
      seen.add(path as string);
      expect(max).toBe(String(LIMIT + 1)); // the command's limit plus the helper itself
      expect(
        r.content
          .split('\n')
          .slice(2)
          .filter((l) => l && !l.endsWith(':')),
      ).toEqual([]); // empty scratch
      const name = (path as string).split('/').pop() as string;
      expect(await waitFor(() => !existsSync(join(base, name)))).toBe(true);
    }
  });

  it('keep the process bound and kill what a run leaves behind', async () => {
    if (!sandbox.cgroups || !sandbox.warmHelpers) return;
    const base = sandbox.cgroups.base;
    expect(await waitFor(() => helpersWaiting(base, 2))).toBe(true);
    const bomb = await bash(`${CGROUP}; for i in $(seq 40); do sleep 30 & done; sleep 30`, Mode.RESTRICTED, 2);
    expect(bomb.content.split('\n')[0]).toMatch(/\/warm-/);
    expect(bomb.content).toContain('Timed out after 2s');
    expect(bomb.content).toMatch(/fork: (retry: )?Resource temporarily unavailable/);
    expect(await waitFor(() => helpersWaiting(base, 1))).toBe(true);
    const escaped = await bash(`${CGROUP}; setsid sleep 60 >/dev/null 2>&1 & echo started`);
    const path = escaped.content.split('\n')[0] as string;
    expect(path).toMatch(/\/warm-/);
    const procs = join('/sys/fs/cgroup/pids', path, 'cgroup.procs');
    // Gone as soon as the result is there (the helper killed it), then the cgroup itself.
    expect(existsSync(procs) ? readFileSync(procs, 'utf8').trim() : '').toBe('');
    expect(await waitFor(() => !existsSync(procs))).toBe(true);
  });

  it('drop a helper that dies while waiting, and runs go on', async () => {
    if (!sandbox.cgroups || !sandbox.warmHelpers) return;
    const base = sandbox.cgroups.base;
    expect(await waitFor(() => helpersWaiting(base, 2))).toBe(true);
    const killed = waiting(base);
    for (const name of killed) for (const pid of procs(base, name)) process.kill(pid, 'SIGKILL');
    // Dropped with their cgroups.
    expect(await waitFor(() => killed.every((name) => !existsSync(join(base, name))))).toBe(true);
    const r = await bash('echo still works');
    expect(r).toMatchObject({ content: 'still works\n', isError: false });
  });

  it('end with the settings: nothing waiting, no cgroup left', async () => {
    if (!sandbox.cgroups || !sandbox.warmHelpers) return;
    await bash('true');
    const base = sandbox.cgroups.base;
    expect(await waitFor(() => helpersWaiting(base, 1))).toBe(true);
    await closeSandboxSettings(sandbox);
    expect(existsSync(base)).toBe(false);
    sandbox = undefined as unknown as SandboxSettings;
  });
});

describe('bedrock-sandbox --await-args', () => {
  function awaitArgs(sent: Buffer): Promise<{ code: number | null; stdout: string; stderr: string; report: string }> {
    return new Promise((resolve) => {
      const child = spawn(ensureHelper(), ['--await-args'], { cwd: '/', stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'] });
      let stdout = '';
      let stderr = '';
      let report = '';
      child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
      child.stderr?.on('data', (d: Buffer) => (stderr += d.toString()));
      child.stdio[3]?.on('data', (d: Buffer) => (report += d.toString()));
      (child.stdio[4] as NodeJS.WritableStream).end(sent);
      child.on('close', (code) => resolve({ code, stdout, stderr, report }));
    });
  }

  it('runs its arguments in the directory it is sent, says ready first, and exits quietly on EOF', async () => {
    const user = process.getuid?.() === 0 ? ['--uid', '65534', '--gid', '65534'] : [];
    const args = [
      dir.path,
      '--restricted',
      ...user,
      '--',
      'bash',
      '-c',
      'pwd; for f in 3 4; do [ -e /proc/$$/fd/$f ] && echo "fd $f inherited"; done; echo checked',
    ];
    const ran = await awaitArgs(Buffer.from(args.map((a) => `${a}\0`).join('')));
    expect(ran).toMatchObject({ code: 0, stderr: '' });
    expect(ran.report).toMatch(/^ready\npgid \d+\n$/);
    // Neither the report pipe (fd 3) nor the arguments pipe (fd 4) reaches the command.
    expect(ran.stdout).toBe(`${dir.path}\nchecked\n`);
    expect(await awaitArgs(Buffer.alloc(0))).toMatchObject({ code: 0, stdout: '', stderr: '' });
  });

  it('refuses malformed arguments and a missing directory', async () => {
    expect(await awaitArgs(Buffer.from(`${dir.path}\0--\0true`))).toMatchObject({
      code: 125,
      stderr: 'bedrock-sandbox: malformed arguments\n',
    });
    expect(await awaitArgs(Buffer.from(`${dir.path}\0`))).toMatchObject({ code: 125, stderr: 'bedrock-sandbox: malformed arguments\n' });
    const missing = await awaitArgs(Buffer.from(`${dir.path}/missing\0--\0true\0`));
    expect(missing.code).toBe(125);
    expect(missing.stderr).toContain('cannot enter the working directory');
  });
});
