/**
 * The sandbox battery: in Restricted mode every attempt to write, to reach the network or to
 * signal outside must be refused by the kernel and reported with the kernel's error; in
 * Unrestricted mode the same writes succeed in the working directory and are refused elsewhere.
 * Tools run as the tool user (65534), never as the tests' own user (root here).
 */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import type { Server } from 'node:net';
import { createSocket } from 'node:dgram';
import type { Socket as UdpSocket } from 'node:dgram';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Mode } from '@bedrock/contracts';
import { executeTool } from '../src/tools/execute-tool.ts';
import { runCommand } from '../src/process/run-command.ts';
import type { ToolOutcome } from '../src/tools/tool-types.ts';
import type { SandboxSettings } from '../src/sandbox/sandbox-settings.ts';
import { executeContext, testSandboxSettings, TOOL_UID } from './support.ts';
import { closeSandboxSettings } from '../src/sandbox/sandbox-settings.ts';

const KERNEL_DENIAL = /Permission denied|Operation not permitted/;

let sandbox: SandboxSettings;
let workDir: string;
const dirs: Record<string, string> = {};

function bash(command: string, mode: Mode, cwd = workDir, timeoutSeconds?: number, settings = sandbox): Promise<ToolOutcome> {
  const input = timeoutSeconds === undefined ? { command } : { command, timeout_seconds: timeoutSeconds };
  return executeTool({ toolName: 'bash', inputJson: JSON.stringify(input), cwd, mode }, executeContext(settings));
}

/**
 * A directory the tool user owns (so file permissions would allow its writes): the directories
 * written to are all such, so that only the sandbox, not file permissions, can refuse a write.
 */
function toolOwned(dir: string): string {
  chownSync(dir, TOOL_UID, TOOL_UID);
  return dir;
}

function seed(dir: string): void {
  for (const name of readdirSync(dir)) rmSync(join(dir, name), { recursive: true, force: true });
  writeFileSync(join(dir, 'existing.txt'), 'original\n');
  chownSync(join(dir, 'existing.txt'), TOOL_UID, TOOL_UID);
}

beforeAll(async () => {
  sandbox = await testSandboxSettings({ limits: { restricted: { processes: 64, memory: 512 * 1024 ** 2 } } });
  workDir = toolOwned(mkdtempSync(join(tmpdir(), 'bedrock-battery-cwd-')));
  dirs.cwd = workDir;
  dirs['/tmp'] = toolOwned(mkdtempSync('/tmp/bedrock-battery-'));
  dirs['/dev/shm'] = toolOwned(mkdtempSync('/dev/shm/bedrock-battery-'));
});

afterAll(async () => {
  for (const dir of Object.values(dirs)) rmSync(dir, { recursive: true, force: true });
  await closeSandboxSettings(sandbox);
});

const writes: Array<[string, (d: string) => string]> = [
  ['create', (d) => `: > ${d}/new.txt`],
  ['write', (d) => `echo more >> ${d}/existing.txt`],
  ['truncate', (d) => `truncate -s 0 ${d}/existing.txt`],
  ['rename', (d) => `mv ${d}/existing.txt ${d}/renamed.txt`],
  ['delete', (d) => `rm ${d}/existing.txt`],
  ['link', (d) => `ln ${d}/existing.txt ${d}/hard.txt`],
  ['symlink', (d) => `ln -s ${d}/existing.txt ${d}/sym.txt`],
  ['mkdir', (d) => `mkdir ${d}/sub`],
  ['mkfifo', (d) => `mkfifo ${d}/fifo`],
];

describe('the machine has the sandbox', () => {
  it('probes Landlock and a working Restricted sandbox', () => {
    // The issue requires everything to work on this machine's kernel: a missing sandbox is a failure, not a skip.
    expect(sandbox.sandboxAvailable).toBe(true);
  });
});

describe('Restricted mode: filesystem writes are refused by the kernel', () => {
  for (const where of ['cwd', '/tmp', '/dev/shm']) {
    for (const [op, command] of writes) {
      it(`${op} in ${where}`, async () => {
        const dir = dirs[where] as string;
        seed(dir);
        const result = await bash(command(dir), Mode.RESTRICTED);
        expect(result.isError).toBe(true);
        expect(result.content).toMatch(KERNEL_DENIAL);
        expect(readdirSync(dir)).toEqual(['existing.txt']);
        expect(readFileSync(join(dir, 'existing.txt'), 'utf8')).toBe('original\n');
      });
    }
  }

  it('reads work, and /dev/null and the private scratch directory are writable; scratch is removed afterwards', async () => {
    seed(workDir);
    const result = await bash(
      'cat existing.txt; echo gone > /dev/null && echo null-ok; echo s > "$TMPDIR/s" && cat "$TMPDIR/s"; echo "$TMPDIR"',
      Mode.RESTRICTED,
    );
    expect(result.isError).toBe(false);
    const lines = result.content.trim().split('\n');
    expect(lines.slice(0, 3)).toEqual(['original', 'null-ok', 's']);
    const scratch = lines[3] as string;
    expect(scratch.startsWith(sandbox.scratchRoot)).toBe(true);
    // A tmpfs in the run's own mount namespace: gone with the run, never visible outside it.
    expect(existsSync(scratch)).toBe(false);
  });
});

describe('Restricted mode: no network', () => {
  let tcp: Server;
  let tcpPort = 0;
  let tcpConnections = 0;
  let udp: UdpSocket;
  let udpPort = 0;
  let datagrams = 0;

  beforeAll(async () => {
    tcp = createServer((socket) => {
      tcpConnections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    tcpPort = (tcp.address() as { port: number }).port;
    udp = createSocket('udp4');
    udp.on('message', () => datagrams++);
    await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
    udpPort = udp.address().port;
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => tcp.close(() => resolve()));
    await new Promise<void>((resolve) => udp.close(() => resolve()));
  });

  it('the listeners are reachable outside the sandbox (control)', async () => {
    const before = tcpConnections;
    const result = await bash(
      `echo hi > /dev/tcp/127.0.0.1/${tcpPort} && perl -e 'use Socket; socket(my $s, PF_INET, SOCK_DGRAM, 0) or die "socket: $!\\n"; send($s, "x", 0, pack_sockaddr_in(${udpPort}, inet_aton("127.0.0.1"))) or die "send: $!\\n"'`,
      Mode.UNRESTRICTED,
    );
    expect(result.isError).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(tcpConnections).toBe(before + 1);
    expect(datagrams).toBeGreaterThan(0);
    datagrams = 0;
  });

  it('TCP connect', async () => {
    const before = tcpConnections;
    const result = await bash(`echo hi > /dev/tcp/127.0.0.1/${tcpPort}`, Mode.RESTRICTED);
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(KERNEL_DENIAL);
    expect(tcpConnections).toBe(before);
  });

  it('TCP listen', async () => {
    const result = await bash(
      `perl -e 'use Socket; socket(my $s, PF_INET, SOCK_STREAM, 0) or die "socket: $!\\n"; bind($s, pack_sockaddr_in(0, inet_aton("127.0.0.1"))) or die "bind: $!\\n"; listen($s, 1) or die "listen: $!\\n"; print "listening\\n"'`,
      Mode.RESTRICTED,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(KERNEL_DENIAL);
    expect(result.content).not.toContain('listening');
  });

  it('UDP send', async () => {
    const result = await bash(
      `perl -e 'use Socket; socket(my $s, PF_INET, SOCK_DGRAM, 0) or die "socket: $!\\n"; send($s, "x", 0, pack_sockaddr_in(${udpPort}, inet_aton("127.0.0.1"))) or die "send: $!\\n"; print "sent\\n"'`,
      Mode.RESTRICTED,
    );
    expect(result.isError).toBe(true);
    expect(result.content).toMatch(KERNEL_DENIAL);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(datagrams).toBe(0);
  });

  it('DNS: a query to a resolver (a local one here) is refused', async () => {
    // A standard DNS query for example.com, type A, sent the way a resolver library does.
    const query = '\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01';
    const result = await bash(
      `perl -e 'use Socket; socket(my $s, PF_INET, SOCK_DGRAM, 0) or die "socket: $!\\n"; connect($s, pack_sockaddr_in(${udpPort}, inet_aton("127.0.0.1"))) or die "connect: $!\\n"; send($s, "${query}", 0) or die "send: $!\\n"; print "sent\\n"'; getent hosts example.com || echo "getent failed: $?"`,
      Mode.RESTRICTED,
    );
    expect(result.content).toMatch(KERNEL_DENIAL);
    expect(result.content).toContain('getent failed');
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(datagrams).toBe(0);
  });

  it('a raw socket, a netlink socket and an IPv6 socket', async () => {
    const result = await bash(
      `for spec in "PF_INET, SOCK_RAW, 1" "16, SOCK_RAW, 0" "PF_INET6, SOCK_STREAM, 0"; do perl -e "use Socket; socket(my \\$s, $spec) or die qq{socket($spec): \\$!\\n}; print qq{opened $spec\\n}"; done`,
      Mode.RESTRICTED,
    );
    expect(result.content).not.toContain('opened');
    expect(result.content.match(/Permission denied/g)?.length).toBe(3);
  });

  it('a unix socket to a server outside the sandbox', async () => {
    const path = join(dirs['/tmp'] as string, 'outside.sock');
    rmSync(path, { force: true });
    let accepted = 0;
    const server = createServer((socket) => {
      accepted++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(path, resolve));
    try {
      const result = await bash(
        `perl -e 'use Socket; socket(my $s, PF_UNIX, SOCK_STREAM, 0) or die "socket: $!\\n"; connect($s, pack_sockaddr_un("${path}")) or die "connect: $!\\n"; print "connected\\n"'`,
        Mode.RESTRICTED,
      );
      expect(result.content).toMatch(KERNEL_DENIAL);
      expect(result.content).not.toContain('connected');
      expect(accepted).toBe(0);
    } finally {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    }
  });
});

describe('Restricted mode: signals and limits', () => {
  let outside: ChildProcess;

  beforeAll(() => {
    // Runs as the tool user too: only the sandbox, not the uid, can keep a tool from signalling it.
    outside = spawn('sleep', ['60'], { stdio: 'ignore', uid: TOOL_UID, gid: TOOL_UID });
  });

  afterAll(() => {
    outside.kill('SIGKILL');
  });

  it('cannot signal a process outside the sandbox, even with the same uid', async () => {
    const result = await bash(`id -u; kill -TERM ${outside.pid}; kill -0 1`, Mode.RESTRICTED);
    expect(result.content.split('\n')[0]).toBe(String(TOOL_UID));
    expect(result.content.match(/Operation not permitted/g)?.length).toBe(2);
    expect(outside.exitCode).toBeNull();
    expect(outside.signalCode).toBeNull();
    // The same command outside the sandbox would kill it: it is signalled only by the kernel's refusal.
    expect(() => process.kill(outside.pid as number, 0)).not.toThrow();
  });

  it('has no capabilities left even as root', async () => {
    const result = await bash(
      'grep -E "^Cap(Eff|Prm|Bnd|Amb)" /proc/self/status; grep NoNewPrivs /proc/self/status; grep Seccomp: /proc/self/status',
      Mode.RESTRICTED,
    );
    expect(result.content).toMatch(/CapEff:\s+0000000000000000/);
    expect(result.content).toMatch(/CapPrm:\s+0000000000000000/);
    expect(result.content).toMatch(/CapBnd:\s+0000000000000000/);
    expect(result.content).toMatch(/NoNewPrivs:\s+1/);
    expect(result.content).toMatch(/Seccomp:\s+2/);
  });

  it('contains a fork bomb, and the runner is healthy afterwards', async () => {
    // Root is exempt from RLIMIT_NPROC: the process bound must come from the pids cgroup then.
    expect(sandbox.cgroups !== null || process.getuid?.() !== 0).toBe(true);
    const marker = `bomb-${process.pid}-${Date.now()}`;
    const started = Date.now();
    const result = await bash(`# ${marker}\nb() { b | b & }; b; sleep 30`, Mode.RESTRICTED, workDir, 3);
    expect(result.isError).toBe(true);
    expect(result.content).toContain('Timed out after 3s');
    // The process limit was reached (bash reports its failed forks).
    expect(result.content).toMatch(/fork: (retry: )?Resource temporarily unavailable/);
    expect(Date.now() - started).toBeLessThan(20_000);
    const survivors = await bash(`pgrep -f ${marker} | grep -v "^$$\\$" | wc -l`, Mode.UNRESTRICTED);
    // The pgrep command line itself contains the marker: at most that one.
    expect(Number(survivors.content.trim())).toBeLessThanOrEqual(1);
    const after = await bash('echo healthy', Mode.RESTRICTED);
    expect(after).toMatchObject({ isError: false, content: 'healthy\n' });
  }, 30_000);

  it('contains a memory bomb, and the runner is healthy afterwards', async () => {
    const result = await bash(`perl -e '$x = "a" x (2 * 1024 ** 3); print "survived\\n"'`, Mode.RESTRICTED);
    expect(result.isError).toBe(true);
    // With a memory cgroup the kernel's OOM killer ends it at memory.max (reported); without, RLIMIT_AS fails the allocation.
    expect(result.content).toContain(
      sandbox.cgroups?.bounds.memory ? 'killed: the run went past its memory limit of 512 MiB' : 'Out of memory',
    );
    expect(result.content).not.toContain('survived');
    const after = await bash('echo healthy', Mode.RESTRICTED);
    expect(after).toMatchObject({ isError: false, content: 'healthy\n' });
  });
});

function changed(op: string, dir: string): boolean {
  return op === 'write' || op === 'truncate'
    ? readFileSync(join(dir, 'existing.txt'), 'utf8') !== 'original\n'
    : readdirSync(dir).join() !== 'existing.txt';
}

describe('Unrestricted mode: the same writes succeed in the working directory only', () => {
  for (const where of ['cwd', '/tmp', '/dev/shm']) {
    for (const [op, command] of writes) {
      it(`${op} in ${where}`, async () => {
        const dir = dirs[where] as string;
        seed(dir);
        // The working directory is the tool's cwd for the cwd case; elsewhere it stays workDir.
        const result = await bash(command(dir), Mode.UNRESTRICTED);
        if (where === 'cwd') {
          expect(result).toMatchObject({ isError: false, exitCode: 0 });
          expect(changed(op, dir)).toBe(true);
        } else {
          expect(result.isError).toBe(true);
          expect(result.content).toMatch(KERNEL_DENIAL);
          expect(changed(op, dir)).toBe(false);
        }
      });
    }
  }

  it('with BEDROCK_UNRESTRICTED_WRITE=host, writes outside the working directory succeed too', async () => {
    const host = await testSandboxSettings({ unrestrictedWrite: 'host' });
    try {
      for (const [op, command] of writes) {
        const dir = dirs['/tmp'] as string;
        seed(dir);
        const result = await bash(command(dir), Mode.UNRESTRICTED, workDir, undefined, host);
        expect({ op, ...result }).toMatchObject({ op, isError: false, exitCode: 0 });
        expect(changed(op, dir)).toBe(true);
      }
    } finally {
      await closeSandboxSettings(host);
    }
  });
});

describe("Unrestricted mode: the network stays, the system's own ports do not", () => {
  let denied: Server;
  let open: Server;
  const port = (s: Server) => (s.address() as { port: number }).port;
  const connect = (p: number) => `if (exec 3<>/dev/tcp/127.0.0.1/${p}) 2>/dev/null; then echo "OPEN ${p}"; else echo "CLOSED ${p}"; fi`;

  beforeAll(async () => {
    denied = createServer((socket) => socket.destroy());
    open = createServer((socket) => socket.destroy());
    await new Promise<void>((resolve) => denied.listen(0, '127.0.0.1', resolve));
    await new Promise<void>((resolve) => open.listen(0, '127.0.0.1', resolve));
  });

  afterAll(async () => {
    await new Promise<void>((resolve) => denied.close(() => resolve()));
    await new Promise<void>((resolve) => open.close(() => resolve()));
  });

  it('refuses a denied port on every address, with the prebuilt rules and without them', async () => {
    const withHolder = await testSandboxSettings({ denyPorts: [port(denied)] });
    expect(withHolder.netRuleset).toBeDefined();
    const { netRuleset: _holder, ...slowPath } = withHolder;
    try {
      for (const settings of [withHolder, slowPath]) {
        const result = await bash(
          `${connect(port(denied))}; ${connect(port(open))}; (exec 3<>/dev/tcp/::1/${port(denied)}) 2>&1 | grep -q 'Permission denied' && echo v6-refused`,
          Mode.UNRESTRICTED,
          workDir,
          undefined,
          settings,
        );
        // IPv6 too: refused by the kernel (no listener there would say "Connection refused").
        expect(result.content).toContain('v6-refused');
        expect(result.content).toContain(`CLOSED ${port(denied)}`);
        expect(result.content).toContain(`OPEN ${port(open)}`);
      }
    } finally {
      await closeSandboxSettings(withHolder);
    }
  });

  it('follows a port added after start (a new holder), and a dead holder is never weaker', async () => {
    const settings = await testSandboxSettings({ denyPorts: [1] });
    try {
      expect((await bash(connect(port(denied)), Mode.UNRESTRICTED, workDir, undefined, settings)).content).toContain(
        `OPEN ${port(denied)}`,
      );
      settings.denyPorts.add(port(denied));
      expect((await bash(connect(port(denied)), Mode.UNRESTRICTED, workDir, undefined, settings)).content).toContain(
        `CLOSED ${port(denied)}`,
      );
      const spec = (await settings.netRuleset?.spec(settings.denyPorts)) as string;
      process.kill(Number(spec.split(':')[0]), 'SIGKILL');
      await new Promise((r) => setTimeout(r, 100));
      expect((await bash(connect(port(denied)), Mode.UNRESTRICTED, workDir, undefined, settings)).content).toContain(
        `CLOSED ${port(denied)}`,
      );
    } finally {
      await closeSandboxSettings(settings);
    }
  });
});

describe('separate users per working directory (BEDROCK_TOOL_UID=owner)', () => {
  it("a tool runs as its directory's owner and cannot read another owner's directory; root-owned ones get nobody", async () => {
    const settings = await testSandboxSettings({ toolUid: 'owner' });
    const alice = mkdtempSync(join(tmpdir(), 'bedrock-owner-a-'));
    const bob = mkdtempSync(join(tmpdir(), 'bedrock-owner-b-'));
    const rootOwned = mkdtempSync(join(tmpdir(), 'bedrock-owner-root-'));
    try {
      chownSync(alice, 60001, 60001);
      chownSync(bob, 60002, 60002);
      writeFileSync(join(bob, 'notes.txt'), 'bob only\n', { mode: 0o600 });
      chownSync(join(bob, 'notes.txt'), 60002, 60002);
      const inAlice = await bash(
        `id -u; cat ${bob}/notes.txt || echo DENIED; echo mine > own.txt && echo WROTE`,
        Mode.UNRESTRICTED,
        alice,
        undefined,
        settings,
      );
      expect(inAlice.content).toMatch(/^60001\n/);
      expect(inAlice.content).toContain('DENIED');
      expect(inAlice.content).not.toContain('bob only');
      expect(inAlice.content).toContain('WROTE');
      chmodSync(rootOwned, 0o755);
      const inRootOwned = await bash('id -u', Mode.RESTRICTED, rootOwned, undefined, settings);
      expect(inRootOwned.content.trim()).toBe(String(TOOL_UID));
    } finally {
      for (const d of [alice, bob, rootOwned]) rmSync(d, { recursive: true, force: true });
      await closeSandboxSettings(settings);
    }
  });
});

describe('best effort by Landlock ABI (helper pinned to older ABIs)', () => {
  // Every ABI the helper knows, down to 1: writes stay refused at each (truncate(2) by seccomp
  // before ABI 3); signal scoping exists only from ABI 6, as the kernel defines it.
  for (const abi of [1, 2, 3, 4, 5, 6, 7]) {
    it(`ABI ${abi}`, async () => {
      const dir = dirs['/tmp'] as string;
      seed(dir);
      const command = [
        `: > ${dir}/new.txt`,
        `echo more >> ${dir}/existing.txt`,
        `perl -e 'truncate("${dir}/existing.txt", 0) or die "truncate: $!\\n"'`,
        `mv ${dir}/existing.txt ${dir}/renamed.txt`,
        `ln ${dir}/existing.txt ${dir}/hard.txt`,
        `mkdir ${dir}/sub`,
        `echo x > /dev/tcp/127.0.0.1/9`,
        `kill -0 1 && echo signal-allowed`,
      ].join('; ');
      const result = await runCommand({
        argv: [sandbox.helperPath, '--restricted', '--max-abi', String(abi), '--', 'bash', '-c', command],
        cwd: dir,
        env: process.env,
        timeoutMs: 10_000,
      });
      // The /dev/tcp attempt prints two lines (socket, then the redirection).
      expect(result.output.match(/Permission denied/g)?.length).toBe(8);
      expect(readdirSync(dir)).toEqual(['existing.txt']);
      expect(readFileSync(join(dir, 'existing.txt'), 'utf8')).toBe('original\n');
      expect(result.output.includes('signal-allowed')).toBe(abi < 6);
    });
  }
});
