/**
 * The tenants battery: two users, each with their own uid and workspace under one root, as the
 * conversation service's jobs carry them (tool_uid, tool_gid, workspace_path). From user A's tools,
 * Restricted and Unrestricted, with the view and with Landlock alone, B's workspace, the runner's
 * files and other users' processes are out of reach, and writes land only in A's workspace and
 * scratch, owned by A. Then the kernel's bounds: the scratch's size, the run's memory and CPU share.
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  readdirSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Mode } from '@bedrock/contracts';
import { executeTool } from '../src/tools/execute-tool.ts';
import type { ToolOutcome } from '../src/tools/tool-types.ts';
import type { SandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import { closeSandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import { executeContext, testSandboxSettings } from './support.ts';

const UID_A = 200_101;
const UID_B = 200_102;
const MiB = 1024 ** 2;
const SECRET_B = `secret-of-b-${process.pid}`;
const ARGV_SECRET = `argv-secret-of-b-${process.pid}`;
/** The runner's files, out of A's reach: the repository, /home, /root (and a data directory, below). */
const REPO_FILE = fileURLToPath(new URL('../../../package.json', import.meta.url));
const HOME_DIR = `/home/bedrock-tenants-${process.pid}`;
const ROOT_FILE = `/root/.bedrock-tenants-${process.pid}`;

let root: string;
let wsA: string;
let wsB: string;
let dataDir: string;
let withView: SandboxSettings;
let bOutside: ChildProcess;

/** Landlock alone: the same runner, as one that cannot mount would run workspace jobs. */
const landlockOnly = (): SandboxSettings => ({ ...withView, views: false });

function asA(command: string, mode: Mode, settings: SandboxSettings = withView, timeoutSeconds?: number): Promise<ToolOutcome> {
  const input = timeoutSeconds === undefined ? { command } : { command, timeout_seconds: timeoutSeconds };
  return executeTool(
    { toolName: 'bash', inputJson: JSON.stringify(input), cwd: wsA, mode, toolUid: UID_A, toolGid: UID_A, workspacePath: wsA },
    executeContext(settings),
  );
}

function own(path: string, uid: number, mode: number): string {
  chownSync(path, uid, uid);
  chmodSync(path, mode);
  return path;
}

// Everything B has is readable and writable by file permissions (world-readable and
// world-writable), so that only the sandbox can be what refuses.
beforeAll(async () => {
  root = mkdtempSync(join(tmpdir(), 'bedrock-tenants-'));
  withView = await testSandboxSettings({ workspaceRoot: root });
  chmodSync(root, 0o755);
  wsA = join(root, 'ws-a');
  wsB = join(root, 'ws-b');
  for (const d of [wsA, wsB]) mkdirSync(d, { recursive: true });
  own(wsA, UID_A, 0o700);
  // B's workspace is open to anyone by its mode bits: only the sandbox can keep A out.
  own(wsB, UID_B, 0o777);
  writeFileSync(join(wsB, 'secret.txt'), `${SECRET_B}\n`);
  own(join(wsB, 'secret.txt'), UID_B, 0o666);
  dataDir = join(root, 'data');
  mkdirSync(dataDir);
  chmodSync(dataDir, 0o777);
  writeFileSync(join(dataDir, 'admin-token'), `admin-token-${process.pid}\n`, { mode: 0o644 });
  mkdirSync(HOME_DIR, { recursive: true });
  chmodSync(HOME_DIR, 0o777);
  writeFileSync(join(HOME_DIR, '.env'), `HOME_SECRET=${process.pid}\n`, { mode: 0o644 });
  writeFileSync(ROOT_FILE, `root-secret-${process.pid}\n`, { mode: 0o644 });
  // A process of B with a secret on its command line.
  bOutside = spawn('bash', ['-c', `sleep 120; : ${ARGV_SECRET}`], { stdio: 'ignore', uid: UID_B, gid: UID_B });
});

afterAll(async () => {
  bOutside?.kill('SIGKILL');
  rmSync(root, { recursive: true, force: true });
  rmSync(HOME_DIR, { recursive: true, force: true });
  rmSync(ROOT_FILE, { force: true });
  await closeSandboxSettings(withView);
});

describe('the machine gives workspace runs a view', () => {
  it('probes views (root and CAP_SYS_ADMIN here), the bounds and the uid range', () => {
    // This machine must have them all: a missing one is a failure, not a skip.
    expect(withView.views).toBe(true);
    expect(withView.cgroups?.bounds).toMatchObject({ pids: true, memory: true, cpu: true });
    expect(withView.toolUids).toEqual({ first: 200_000, last: 299_999 });
  });
});

const modes: Array<[string, Mode]> = [
  ['Restricted', Mode.RESTRICTED],
  ['Unrestricted', Mode.UNRESTRICTED],
];
/**
 * The view (a fresh root and pid namespace), and Landlock alone (a runner that cannot mount, as on
 * Kubernetes without CAP_SYS_ADMIN).
 */
const confinements: Array<[string, () => SandboxSettings]> = [
  ['with the view', () => withView],
  ['with Landlock alone (no mounts)', landlockOnly],
];

for (const [confinement, settings] of confinements) {
  for (const [modeName, mode] of modes) {
    describe(`${modeName} tool of user A, ${confinement}`, () => {
      it("runs as A's own uid and gid", async () => {
        const result = await asA('id -u; id -g; id -G', mode, settings());
        expect(result.content).toBe(`${UID_A}\n${UID_A}\n${UID_A}\n`);
      });

      it("cannot list or read B's workspace", async () => {
        const result = await asA(`ls ${wsB} && echo LISTED; cat ${wsB}/secret.txt; ls -1 ${root} 2>/dev/null; echo END`, mode, settings());
        expect(result.content).not.toContain('LISTED');
        expect(result.content).not.toContain(SECRET_B);
        expect(result.content).toMatch(/No such file or directory|Permission denied/);
        // The root of the workspaces shows A's own at most (as the view's mount point), never B's or the data.
        const listed = (result.content.split('\n').slice(-3, -1) as string[]).filter((l) => !l.includes(':'));
        expect(listed.filter((l) => l === 'ws-b' || l === 'data')).toEqual([]);
      });

      it('cannot read a file in /root, /home, the repository or a data directory', async () => {
        const files = [ROOT_FILE, join(HOME_DIR, '.env'), REPO_FILE, join(dataDir, 'admin-token')];
        const result = await asA(files.map((f) => `cat ${f} || echo "REFUSED ${f}"`).join('; '), mode, settings());
        for (const f of files) expect(result.content).toContain(`REFUSED ${f}`);
        expect(result.content).not.toMatch(/root-secret|HOME_SECRET|admin-token-|"name": "bedrock"/);
      });

      it("cannot write outside A's workspace and scratch; can write its scratch (and, Unrestricted, its workspace)", async () => {
        const targets = [join(wsB, 'planted'), join(dataDir, 'planted'), join(HOME_DIR, 'planted'), join(root, 'planted')];
        const result = await asA(
          `${targets.map((t) => `echo x > ${t} && echo "WROTE ${t}"`).join('; ')}; echo s > "$TMPDIR/s" && echo SCRATCH-OK; echo w > mine.txt && echo WORKSPACE-OK`,
          mode,
          settings(),
        );
        for (const t of targets) {
          expect(result.content).not.toContain(`WROTE ${t}`);
          expect(existsSync(t)).toBe(false);
        }
        expect(result.content).toContain('SCRATCH-OK');
        expect(result.content.includes('WORKSPACE-OK')).toBe(mode === Mode.UNRESTRICTED);
        if (mode === Mode.UNRESTRICTED) {
          // A's files are A's.
          const st = statSync(join(wsA, 'mine.txt'));
          expect([st.uid, st.gid]).toEqual([UID_A, UID_A]);
          rmSync(join(wsA, 'mine.txt'));
        }
      });
    });
  }
}

describe("other users' processes", () => {
  it("are visible on the host (control): B's sleep and its argv", async () => {
    await new Promise((r) => setTimeout(r, 100));
    expect(readFileSync(`/proc/${bOutside.pid}/cmdline`, 'utf8')).toContain(ARGV_SECRET);
  });

  for (const [modeName, mode] of modes) {
    it(`are invisible to a ${modeName} tool with the view: ps -e and /proc show only its own`, async () => {
      const result = await asA('ps -e -o pid=,args=; echo ---; ls /proc | grep -E "^[0-9]+$" | tr "\\n" " "', mode);
      expect(result.content).not.toContain(ARGV_SECRET);
      expect(result.content).not.toContain('sleep 120');
      const [ps, proc] = result.content.split('---\n') as [string, string];
      // The namespace's first process (the helper), the shell, ps; then the shell, ls, grep, tr.
      expect(ps.trim().split('\n').length).toBeLessThanOrEqual(4);
      const pids = proc.trim().split(' ').map(Number);
      expect(Math.max(...pids)).toBeLessThan(20);
      expect(pids).not.toContain(bOutside.pid);
    });
  }
});

describe('the job decides the user, within the runner’s range', () => {
  const job = (extra: { toolUid?: number; toolGid?: number; workspacePath?: string }, mode = Mode.UNRESTRICTED) =>
    executeTool({ toolName: 'bash', inputJson: JSON.stringify({ command: 'id -u' }), cwd: wsA, mode, ...extra }, executeContext(withView));

  it('refuses a uid outside BEDROCK_TOOL_UIDS, a workspace job without a uid, and a cwd outside the workspace', async () => {
    for (const extra of [
      { toolUid: 1000, toolGid: 1000, workspacePath: wsA },
      { toolUid: UID_A, toolGid: 0, workspacePath: wsA },
      { toolUid: 0, toolGid: 0, workspacePath: wsA },
      { toolUid: UID_A, toolGid: UID_A, workspacePath: wsB },
    ]) {
      const result = await job(extra);
      expect({ extra, isError: result.isError }).toEqual({ extra, isError: true });
      expect(result.content).toMatch(/^Refused/);
    }
  });

  it('patch creates files as A, in A’s workspace only', async () => {
    const patch = (path: string) =>
      executeTool(
        {
          toolName: 'patch',
          inputJson: JSON.stringify({ path, patches: [{ operation: 'overwrite', new_text: 'hello\n' }] }),
          cwd: wsA,
          mode: Mode.UNRESTRICTED,
          toolUid: UID_A,
          toolGid: UID_A,
          workspacePath: wsA,
        },
        executeContext(withView),
      );
    const made = await patch('sub/new.txt');
    expect(made.isError).toBe(false);
    for (const p of [join(wsA, 'sub'), join(wsA, 'sub', 'new.txt')]) {
      const st = statSync(p);
      expect([p, st.uid, st.gid]).toEqual([p, UID_A, UID_A]);
    }
    const outside = await patch(join(wsB, 'planted.txt'));
    expect(outside.isError).toBe(true);
    expect(outside.content).toContain('outside the workspace');
    expect(existsSync(join(wsB, 'planted.txt'))).toBe(false);
    rmSync(join(wsA, 'sub'), { recursive: true, force: true });
  });
});

// The scratch's size, the run's memory (an OOM kill, reported) and its CPU share.
describe('bounds by the kernel', () => {
  it('the scratch tmpfs has a size: a write past it fails with ENOSPC', async () => {
    const small = await testSandboxSettings({ scratchSize: 8 * MiB, workspaceRoot: root });
    try {
      for (const [, mode] of modes) {
        const result = await asA('head -c 20M /dev/zero > /tmp/big; ls -l /tmp/big | cut -d" " -f5', mode, small);
        expect(result.content).toContain('No space left on device');
        expect(Number(result.content.trim().split('\n').pop())).toBeLessThanOrEqual(8 * MiB);
      }
    } finally {
      await closeSandboxSettings(small);
    }
  });

  it('a run past its memory limit is killed by the kernel and reported (tmpfs pages and a growing process alike)', async () => {
    const bounded = await testSandboxSettings({
      workspaceRoot: root,
      scratchSize: 1024 * MiB,
      limits: { restricted: { memory: 128 * MiB }, unrestricted: { memory: 128 * MiB } },
    });
    try {
      const tmpfs = await asA('head -c 400M /dev/zero > /tmp/big; echo "exit $?"', Mode.RESTRICTED, bounded);
      expect(tmpfs.isError).toBe(true);
      expect(tmpfs.content).toContain('killed: the run went past its memory limit of 128 MiB');
      const grows = await asA('head -c 2G /dev/zero | tail -n 1 | wc -c', Mode.UNRESTRICTED, bounded);
      expect(grows.isError).toBe(true);
      expect(grows.content).toContain('killed: the run went past its memory limit of 128 MiB');
      const after = await asA('echo healthy', Mode.RESTRICTED, bounded);
      expect(after).toMatchObject({ isError: false, content: 'healthy\n' });
    } finally {
      await closeSandboxSettings(bounded);
    }
  }, 60_000);

  it('the run gets its CPU share (cpu.max, or cfs_quota_us on cgroup v1), read from its cgroup while it runs', async () => {
    const half = await testSandboxSettings({ limits: { restricted: { cpus: 0.5 } }, workspaceRoot: root });
    try {
      const bounds = half.cgroups?.bounds;
      expect(bounds?.cpu).toBe(true);
      let quota = '';
      const result = await executeTool(
        {
          toolName: 'bash',
          inputJson: JSON.stringify({ command: 'grep -E "^[0-9]+:(cpu|cpu,cpuacct|cpuacct,cpu|):" /proc/self/cgroup; sleep 1' }),
          cwd: wsA,
          mode: Mode.RESTRICTED,
          toolUid: UID_A,
          toolGid: UID_A,
          workspacePath: wsA,
        },
        {
          ...executeContext(half),
          onOutput: (text) => {
            if (quota) return;
            const path = /^\d+:[^:]*:(.*)$/m.exec(text)?.[1];
            if (!path) return;
            quota =
              bounds?.version === 'v2'
                ? readFileSync(join('/sys/fs/cgroup', path, 'cpu.max'), 'utf8').trim()
                : readFileSync(join('/sys/fs/cgroup/cpu', path, 'cpu.cfs_quota_us'), 'utf8').trim() +
                  ' ' +
                  readFileSync(join('/sys/fs/cgroup/cpu', path, 'cpu.cfs_period_us'), 'utf8').trim();
          },
        },
      );
      expect(result.isError).toBe(false);
      expect(quota).toBe('50000 100000');
    } finally {
      await closeSandboxSettings(half);
    }
  });
});

describe('supervision in the pid namespace', () => {
  it('a timeout kills the whole tree of a view run, setsid escapees included', async () => {
    const started = Date.now();
    const result = await asA('sleep 41 & setsid sleep 42 & (sleep 43 &) ; sleep 44', Mode.UNRESTRICTED, withView, 1);
    expect(result.content).toContain('Timed out after 1s');
    expect(Date.now() - started).toBeLessThan(10_000);
    // The pid namespace's end kills them all; the kernel's teardown takes a moment on a busy machine.
    const sleepers = () =>
      readdirSync('/proc')
        .filter((n) => /^\d+$/.test(n))
        .filter((n) => {
          try {
            // Exactly this test's commands, run as its tool user: not any `sleep 42…` of the machine.
            const command = readFileSync(`/proc/${n}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
            const uid = /^Uid:\s*(\d+)/m.exec(readFileSync(`/proc/${n}/status`, 'utf8'))?.[1];
            return /^sleep 4[1-4]$/.test(command) && uid === String(UID_A);
          } catch {
            return false;
          }
        });
    // A killed process still in an uninterruptible wait (paging in `sleep` while the disk is busy)
    // goes only once that ends; an escapee would live 41 s and more.
    const deadline = Date.now() + 10_000;
    while (sleepers().length > 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    // What is left, with its state and pid in each namespace, to tell a slow teardown from an escape.
    const described = (pid: string) => {
      try {
        const status = readFileSync(`/proc/${pid}/status`, 'utf8');
        const field = (name: string) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1] ?? '?';
        // Its command, parent, namespace pids and cgroup: enough to tell a slow teardown from an
        // escape, and an escape from a process of another test.
        const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ').trim();
        const cgroup = readFileSync(`/proc/${pid}/cgroup`, 'utf8').trim().split('\n').pop();
        return `${pid} '${cmdline}' ${field('State')} PPid ${field('PPid')} NSpid ${field('NSpid')} cgroup ${cgroup}`;
      } catch {
        return `${pid} gone`;
      }
    };
    expect(sleepers().map(described)).toEqual([]);
  });
});

describe('nothing of a run is left on the host', () => {
  it('no view, scratch or cgroup of a finished run remains', async () => {
    await asA('echo x > /tmp/x', Mode.RESTRICTED);
    expect(readdirSync(withView.scratchRoot).filter((n) => n.startsWith('bedrock-run-'))).toEqual([]);
    const mounts = readFileSync('/proc/self/mountinfo', 'utf8');
    expect(mounts).not.toContain('bedrock-view');
    expect(mounts).not.toContain(wsA);
  });
});
