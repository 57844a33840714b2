import { hostname } from 'node:os';
import { describe, expect, it } from '@jest/globals';
import { ConfigError } from '@bedrock/platform/config';
import { DEFAULT_HELPER_PATH, readToolRunnerConfig } from './config.ts';
import { limitArgs } from './sandbox/limits.ts';

const GiB = 1024 ** 3;
const MiB = 1024 ** 2;

function problems(env: Record<string, string>): readonly string[] {
  try {
    readToolRunnerConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('no ConfigError');
}

describe('readToolRunnerConfig', () => {
  it('gives the defaults, nested per concern, from an empty environment', () => {
    const config = readToolRunnerConfig({});
    expect(config.server).toEqual({ host: '0.0.0.0', metricsPort: 9464, shutdownGrace: 10_000, grpcPort: 50053 });
    expect(config.transport.kind).toBe('redis');
    expect(config.runner).toEqual({ id: expect.any(String), consume: true, concurrency: 8, reportInterval: 10_000 });
    expect(config.sandbox).toMatchObject({
      helper: DEFAULT_HELPER_PATH,
      scratch: true,
      toolUid: 65534,
      toolGid: 65534,
      unrestrictedWrite: 'workspace',
      denyPorts: [5432, 6379, 50051, 50052, 50053],
      pidsCgroup: 'auto',
      warmHelpers: 2,

      scratchSize: 256 * MiB,
      scratchInodes: 65_536,
      viewPaths: ['/usr', '/bin', '/sbin', '/lib', '/lib32', '/lib64', '/libx32', '/etc', '/opt'],
    });
    expect(config.sandbox.scratchRoot).toMatch(/\/bedrock-scratch-\d+$/);
    expect(config.limits).toEqual({
      restricted: { memory: 4 * GiB, cpus: 1, cpuTime: 1_800_000, processes: 256, fileSize: 256 * MiB, openFiles: 1024 },
      unrestricted: { memory: 16 * GiB, cpus: 2, cpuTime: 1_800_000, processes: 2048, fileSize: 8 * GiB, openFiles: 8192 },
    });
    expect(config.output).toEqual({ head: 50_000, tail: 50_000, flushInterval: 250, streamMax: 1_000_000 });
  });

  it('makes up a runner id per read when BEDROCK_RUNNER_ID is unset: <hostname>-<random>', () => {
    const a = readToolRunnerConfig({}).runner.id;
    const b = readToolRunnerConfig({}).runner.id;
    expect(a).toMatch(new RegExp(`^${hostname().replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}-[0-9a-f]{6}$`));
    expect(a).not.toBe(b);
    expect(readToolRunnerConfig({ BEDROCK_RUNNER_ID: 'runner-7' }).runner.id).toBe('runner-7');
  });

  it('reads durations and sizes with their units', () => {
    const config = readToolRunnerConfig({
      BEDROCK_SHUTDOWN_GRACE: '45s',
      BEDROCK_RUNNER_REPORT_INTERVAL: '2.5s',
      BEDROCK_RESTRICTED_MEMORY: '512MiB',
      BEDROCK_RESTRICTED_CPU_TIME: '90s',
      BEDROCK_UNRESTRICTED_FILE_SIZE: '1GB',
      BEDROCK_UNRESTRICTED_CPU_TIME: '1h',
      BEDROCK_OUTPUT_HEAD: '64KiB',
      BEDROCK_OUTPUT_TAIL: '100B',
      BEDROCK_OUTPUT_FLUSH_INTERVAL: '100ms',
      BEDROCK_OUTPUT_STREAM_MAX: '2MB',
    });
    expect(config.server.shutdownGrace).toBe(45_000);
    expect(config.runner.reportInterval).toBe(2500);
    expect(config.limits.restricted).toMatchObject({ memory: 512 * MiB, cpuTime: 90_000 });
    expect(config.limits.unrestricted).toMatchObject({ fileSize: 1e9, cpuTime: 3_600_000 });
    expect(config.output).toEqual({ head: 64 * 1024, tail: 100, flushInterval: 100, streamMax: 2e6 });
  });

  it('reads the sandbox settings: owner or a uid, port and path lists', () => {
    const config = readToolRunnerConfig({
      BEDROCK_TOOL_UID: 'owner',
      BEDROCK_TOOL_DENY_PORTS: '5432, 6380',
      BEDROCK_TOOL_HIDE_PATHS: '/run/a,/run/b',
      BEDROCK_UNRESTRICTED_WRITE: 'host',
      BEDROCK_RUNNER_CONSUME: 'false',
    });
    expect(config.sandbox).toMatchObject({
      toolUid: 'owner',
      denyPorts: [5432, 6380],
      hidePaths: ['/run/a', '/run/b'],
      unrestrictedWrite: 'host',
    });
    expect(config.runner.consume).toBe(false);
    expect(readToolRunnerConfig({ BEDROCK_TOOL_UID: '1000' }).sandbox.toolUid).toBe(1000);
  });

  it('reads the workspace storage settings: root, image, the uid range, the clone timeout', () => {
    expect(readToolRunnerConfig({}).workspaces).toEqual({
      root: '/var/lib/bedrock/workspaces',
      imageSize: 20 * GiB,
      toolUids: { first: 200_000, last: 299_999 },
      cloneTimeout: 600_000,
    });
    const config = readToolRunnerConfig({
      BEDROCK_WORKSPACE_ROOT: '/srv/ws',
      BEDROCK_WORKSPACE_IMAGE: '/srv/ws.btrfs',
      BEDROCK_WORKSPACE_IMAGE_SIZE: '1GiB',
      BEDROCK_TOOL_UIDS: ' 300000 - 300999 ',
      BEDROCK_WORKSPACE_CLONE_TIMEOUT: '90s',
    });
    expect(config.workspaces).toEqual({
      root: '/srv/ws',
      image: '/srv/ws.btrfs',
      imageSize: GiB,
      toolUids: { first: 300_000, last: 300_999 },
      cloneTimeout: 90_000,
    });
    expect(problems({ BEDROCK_TOOL_UIDS: '5', BEDROCK_WORKSPACE_ROOT: 'ws', BEDROCK_WORKSPACE_IMAGE_SIZE: '1MiB' })).toEqual(
      expect.arrayContaining([
        'BEDROCK_TOOL_UIDS="5" is invalid: expected a range of uids FIRST-LAST (1000 to 4294967294) (not FIRST-LAST)',
        expect.stringMatching(/^BEDROCK_WORKSPACE_ROOT="ws" is invalid: expected an absolute path/),
        expect.stringMatching(/^BEDROCK_WORKSPACE_IMAGE_SIZE="1MiB" is invalid: .*at least 256MiB/),
      ]),
    );
    expect(problems({ BEDROCK_TOOL_UIDS: '0-10' })).toEqual([expect.stringMatching(/^BEDROCK_TOOL_UIDS="0-10" is invalid/)]);
    expect(problems({ BEDROCK_TOOL_UIDS: '2000-1000' })).toEqual([expect.stringMatching(/FIRST is above LAST/)]);
  });

  it('reads the tenants settings: the allowed tool uids, the scratch size, the view and the CPU share', () => {
    const config = readToolRunnerConfig({
      BEDROCK_TOOL_UIDS: '300000-300999',
      BEDROCK_SCRATCH_SIZE: '64MiB',
      BEDROCK_VIEW_PATHS: '/usr,/etc',
      BEDROCK_RESTRICTED_CPUS: '0.5',
    });
    expect(config.workspaces.toolUids).toEqual({ first: 300_000, last: 300_999 });
    expect(config.sandbox).toMatchObject({
      scratchSize: 64 * MiB,
      viewPaths: ['/usr', '/etc'],
    });
    expect(config.limits.restricted.cpus).toBe(0.5);
    expect(() => readToolRunnerConfig({ BEDROCK_TOOL_UIDS: '5-2' })).toThrow(/BEDROCK_TOOL_UIDS/);
    expect(() => readToolRunnerConfig({ BEDROCK_TOOL_UIDS: '200000' })).toThrow(/FIRST-LAST/);
    expect(() => readToolRunnerConfig({ BEDROCK_RESTRICTED_CPUS: 'two' })).toThrow(/BEDROCK_RESTRICTED_CPUS/);
  });

  it('refuses a bare number for a duration or a size, naming the variable and the syntax', () => {
    const found = problems({
      BEDROCK_OUTPUT_FLUSH_INTERVAL: '250',
      BEDROCK_RESTRICTED_CPU_TIME: '1800',
      BEDROCK_OUTPUT_HEAD: '50000',
    });
    expect(found).toEqual([
      expect.stringMatching(
        /^BEDROCK_RESTRICTED_CPU_TIME="1800" is invalid: expected a duration with its unit .*write the unit: 500ms, 30s/,
      ),
      expect.stringMatching(/^BEDROCK_OUTPUT_HEAD="50000" is invalid: expected a size with its unit .*write the unit: 100B, 50KB/),
      expect.stringMatching(/^BEDROCK_OUTPUT_FLUSH_INTERVAL="250" is invalid: expected a duration with its unit/),
    ]);
  });

  it('names every bad variable at once, with what a valid value looks like', () => {
    const found = problems({
      BEDROCK_TOOL_UID: '0',
      BEDROCK_TOOL_DENY_PORTS: '22,70000',
      BEDROCK_TOOL_HIDE_PATHS: 'relative/dir',
      BEDROCK_RUNNER_CONCURRENCY: '0',
      BEDROCK_RESTRICTED_MEMORY: '1MiB',
      BEDROCK_UNRESTRICTED_WRITE: 'everything',
      BEDROCK_TRANSPORT: 'kafka',
    });
    expect(found).toHaveLength(7);
    expect(found).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^BEDROCK_TOOL_UID="0" is invalid: expected a uid ≥ 1, or owner/),
        expect.stringMatching(/^BEDROCK_TOOL_DENY_PORTS="22,70000" is invalid: expected ports 1..65535, comma-separated/),
        expect.stringMatching(/^BEDROCK_TOOL_HIDE_PATHS="relative\/dir" is invalid: expected absolute paths/),
        'BEDROCK_RUNNER_CONCURRENCY="0" is invalid: expected an integer 1..256 (out of range)',
        expect.stringMatching(/^BEDROCK_RESTRICTED_MEMORY="1MiB" is invalid: .*at least 64MiB/),
        'BEDROCK_UNRESTRICTED_WRITE="everything" is invalid: expected one of workspace, host',
        'BEDROCK_TRANSPORT="kafka" is invalid: expected one of redis, memory',
      ]),
    );
  });

  it('lets typed overrides from code win over the environment, and validates them too', () => {
    const config = readToolRunnerConfig(
      { BEDROCK_GRPC_PORT: '7000', BEDROCK_RUNNER_ID: 'from-env', BEDROCK_TRANSPORT: 'redis', BEDROCK_RUNNER_CONCURRENCY: '3' },
      { server: { grpcPort: 0 }, runner: { id: 'embedded' }, transport: { kind: 'memory' }, limits: { restricted: { processes: 64 } } },
    );
    expect(config.server.grpcPort).toBe(0);
    expect(config.runner).toMatchObject({ id: 'embedded', concurrency: 3 });
    expect(config.transport.kind).toBe('memory');
    expect(config.limits.restricted).toMatchObject({ processes: 64, openFiles: 1024 });
    expect(() => readToolRunnerConfig({}, { limits: { unrestricted: { processes: 2 } } })).toThrow(
      'limits.unrestricted.processes (BEDROCK_UNRESTRICTED_PROCESSES) is invalid: expected an integer 8.. (out of range)',
    );
  });
});

describe('limitArgs', () => {
  it('hands the helper bytes and whole CPU seconds, rounded up', () => {
    const limits = { memory: 512 * MiB, cpuTime: 1500, processes: 64, fileSize: 1e6, openFiles: 256, cpus: 1 };
    expect(limitArgs(limits)).toEqual(['--mem', String(512 * MiB), '--cpu', '2', '--nproc', '64', '--fsize', '1000000', '--nofile', '256']);
    expect(limitArgs(readToolRunnerConfig({}).limits.restricted)).toContain('1800');
  });
});
