/**
 * The manifests against docs/security.md, "Boundaries": tools (in the tool-runner's
 * pods) reach neither Postgres nor the internal ports, credentials go only to the service they
 * belong to (DATABASE_URL to conversation alone, each service its own Redis ACL user and its
 * own service token), tools run as a non-root uid, and dev's Redis and Postgres require
 * passwords (the ACL file is loaded into a real redis-server where one exists).
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { REDIS_ACL_SERVICES, redisAclFileLine, redisServiceUser } from '@bedrock/platform';
import { freePort } from '@bedrock/platform/server';
import { connectionAllowed, workloads, type Container, type Endpoint, type Workload } from '../src/cross-refs.ts';
import type { K8sObject } from '../src/kustomize.ts';
import { OVERLAYS, byKind, externalSecrets, render, type Overlay } from './support.ts';

const SERVICES = [...REDIS_ACL_SERVICES];
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** Decoded data of a rendered Secret. */
function secretData(objects: K8sObject[], name: string): Record<string, string> {
  const data = (byKind(objects, 'Secret', name).data ?? {}) as Record<string, string>;
  return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]));
}

/** Every Secret key a workload's containers can read (env, envFrom, secret volumes), as `secret/key`. */
function secretKeysOf(overlay: Overlay, objects: K8sObject[], w: Workload): string[] {
  const keysOf = (name: string): string[] => {
    const rendered = objects.find((o) => o.kind === 'Secret' && o.metadata.name === name);
    return rendered ? Object.keys((rendered.data ?? {}) as object) : (externalSecrets(overlay)[name] ?? []);
  };
  const found: string[] = [];
  for (const c of [...w.pod.containers, ...(w.pod.initContainers ?? [])]) {
    for (const e of c.env ?? [])
      if (e.valueFrom?.secretKeyRef) found.push(`${e.valueFrom.secretKeyRef.name}/${e.valueFrom.secretKeyRef.key}`);
    for (const f of c.envFrom ?? []) if (f.secretRef) found.push(...keysOf(f.secretRef.name).map((k) => `${f.secretRef!.name}/${k}`));
    for (const m of c.volumeMounts ?? []) {
      const secret = (w.pod.volumes ?? []).find((v) => v.name === m.name)?.secret;
      if (secret)
        found.push(...(secret.items ? secret.items.map((i) => i.key) : keysOf(secret.secretName)).map((k) => `${secret.secretName}/${k}`));
    }
  }
  return [...new Set(found)].sort();
}

function env(c: Container, name: string): string | undefined {
  return c.env?.find((e) => e.name === name)?.value;
}

/** The file a container sees at `path`: the Secret and key mounted there, if any. */
function mountedSecretFile(
  w: Workload,
  c: Container,
  path: string,
): { secret: string; key: string; mode?: number; readOnly?: boolean } | undefined {
  for (const m of c.volumeMounts ?? []) {
    const secret = (w.pod.volumes ?? []).find((v) => v.name === m.name)?.secret;
    const item = secret?.items?.find((i) => `${m.mountPath}/${i.path}` === path);
    if (secret && item) return { secret: secret.secretName, key: item.key, mode: secret.defaultMode, readOnly: m.readOnly };
  }
  return undefined;
}

describe.each(OVERLAYS)('%s: trust boundaries', (overlay) => {
  const objects = render(overlay);
  const list = workloads(objects);
  const workload = (name: string) => list.find((w) => w.object.metadata.name === name)!;
  const pod = (name: string): Endpoint => ({ pod: { namespace: workload(name).namespace, labels: workload(name).labels } });
  const namespace = workload('conversation').namespace;
  const kubeDns: Endpoint = { pod: { namespace: 'kube-system', labels: { 'k8s-app': 'kube-dns' } } };
  const prometheus: Endpoint = { pod: { namespace: 'monitoring', labels: { 'app.kubernetes.io/name': 'prometheus' } } };
  const runner = pod('tool-runner');
  // Where Postgres is: dev's pod; prod's managed server on a private address (VPC, peering);
  // prod-ha's CloudNativePG instances.
  const cnpg: Endpoint = { pod: { namespace, labels: { 'cnpg.io/cluster': 'bedrock-pg', 'cnpg.io/podRole': 'instance' } } };
  const postgres: Endpoint[] = [
    ...(overlay === 'dev' ? [pod('postgres')] : []),
    ...(overlay === 'prod-ha' ? [cnpg] : []),
    { pod: { namespace, labels: { 'app.kubernetes.io/name': 'postgres' } } },
    { ips: ['10.20.0.5', '172.31.4.10', '192.168.1.20', '100.64.3.4', 'fd12:3456::5'] },
  ];

  it('the tool-runner cannot reach Postgres, the other services, the cluster or the metadata endpoint; it reaches DNS, Redis and the internet', () => {
    for (const target of postgres)
      expect([JSON.stringify(target), connectionAllowed(objects, runner, target, 5432)]).toEqual([JSON.stringify(target), false]);
    const closed: [string, Endpoint, number][] = [
      ['conversation gRPC', pod('conversation'), 50051],
      ['conversation metrics', pod('conversation'), 9464],
      ['web-bff HTTP', pod('web-bff'), 8080],
      ['web-bff gRPC', pod('web-bff'), 8081],
      ['llm-gateway metrics', pod('llm-gateway'), 9464],
      ['another runner gRPC', runner, 50053],
      ['Kubernetes API (ClusterIP)', { ips: ['10.96.0.1'] }, 443],
      ['cloud metadata', { ips: ['169.254.169.254', 'fe80::a9fe:a9fe'] }, 80],
      ['a node port', { ips: ['192.168.49.2'] }, 10250],
      ['loopback of another host', { ips: ['127.0.0.1'] }, 8080],
    ];
    for (const [what, target, port] of closed) expect([what, connectionAllowed(objects, runner, target, port)]).toEqual([what, false]);
    const open: [string, Endpoint, number, string?][] = [
      ['DNS (UDP)', kubeDns, 53, 'UDP'],
      ['DNS (TCP)', kubeDns, 53],
      ['Redis', overlay === 'dev' ? pod('redis') : { ips: ['10.0.0.8'] }, overlay === 'dev' ? 6379 : 6380],
      ['internet HTTPS', { ips: ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'] }, 443],
      ['internet SSH (git)', { ips: ['140.82.112.3'] }, 22],
    ];
    for (const [what, target, port, protocol] of open)
      expect([what, connectionAllowed(objects, runner, target, port, protocol)]).toEqual([what, true]);
    // The check means something: without NetworkPolicies the runner would reach Postgres.
    expect(
      connectionAllowed(
        objects.filter((o) => o.kind !== 'NetworkPolicy'),
        runner,
        postgres[0]!,
        5432,
      ),
    ).toBe(true);
  });

  it("conversation's gRPC port answers only web-bff and llm-gateway (histories); the tool-runner's only conversation (workspace storage); metrics only Prometheus", () => {
    for (const caller of ['web-bff', 'llm-gateway'])
      expect([caller, connectionAllowed(objects, pod(caller), pod('conversation'), 50051)]).toEqual([caller, true]);
    for (const caller of ['tool-runner', 'conversation'])
      expect([caller, connectionAllowed(objects, pod(caller), pod('conversation'), 50051)]).toEqual([caller, false]);
    expect(connectionAllowed(objects, pod('conversation'), runner, 50053)).toBe(true);
    for (const caller of [...SERVICES.filter((s) => s !== 'conversation'), 'monitoring']) {
      const from = caller === 'monitoring' ? prometheus : pod(caller);
      expect([caller, connectionAllowed(objects, from, runner, 50053)]).toEqual([caller, false]);
    }
    // Nothing new: conversation reaches the runner's gRPC port only, not its metrics, and from
    // outside the namespace (another namespace's pod labelled conversation) nothing.
    expect(connectionAllowed(objects, pod('conversation'), runner, 9464)).toBe(false);
    expect(
      connectionAllowed(objects, { pod: { namespace: 'elsewhere', labels: { 'app.kubernetes.io/name': 'conversation' } } }, runner, 50053),
    ).toBe(false);
    expect(connectionAllowed(objects, { ips: ['203.0.113.7'] }, runner, 50053)).toBe(false);
    expect(connectionAllowed(objects, prometheus, runner, 9464)).toBe(true);
    expect(connectionAllowed(objects, prometheus, pod('conversation'), 9464)).toBe(true);
    expect(connectionAllowed(objects, { ips: ['203.0.113.7'] }, pod('conversation'), 50051)).toBe(false);
    // web-bff is the public entry: open.
    expect(connectionAllowed(objects, { ips: ['203.0.113.7'] }, pod('web-bff'), 8080)).toBe(true);
    if (overlay === 'dev') {
      expect(connectionAllowed(objects, pod('conversation'), pod('postgres'), 5432)).toBe(true);
      for (const s of ['web-bff', 'llm-gateway'])
        expect([s, connectionAllowed(objects, pod(s), pod('postgres'), 5432)]).toEqual([s, false]);
      for (const s of SERVICES) expect([s, connectionAllowed(objects, pod(s), pod('redis'), 6379)]).toEqual([s, true]);
      expect(connectionAllowed(objects, prometheus, pod('redis'), 6379)).toBe(false);
    }
    if (overlay === 'prod-ha') {
      expect(connectionAllowed(objects, pod('conversation'), cnpg, 5432)).toBe(true);
      for (const s of ['web-bff', 'llm-gateway', 'tool-runner'])
        expect([s, connectionAllowed(objects, pod(s), cnpg, 5432)]).toEqual([s, false]);
      for (const s of SERVICES) expect([s, connectionAllowed(objects, pod(s), pod('redis-cluster'), 6379)]).toEqual([s, true]);
      // The cluster bus is the nodes' own.
      for (const s of SERVICES) expect([s, connectionAllowed(objects, pod(s), pod('redis-cluster'), 16379)]).toEqual([s, false]);
      expect(connectionAllowed(objects, pod('redis-cluster'), pod('redis-cluster'), 16379)).toBe(true);
      expect(connectionAllowed(objects, prometheus, pod('redis-cluster'), 6379)).toBe(false);
    }
  });

  it('DATABASE_URL goes to the conversation service only; each service reads only its own Secret', () => {
    // prod-ha: the database credentials are in the Secret CloudNativePG makes (`bedrock-pg-app`).
    const isDatabase = (k: string) => k.endsWith('/DATABASE_URL') || k.startsWith('bedrock-pg-app/');
    const readers = list.filter((w) => secretKeysOf(overlay, objects, w).some(isDatabase)).map((w) => w.object.metadata.name);
    expect(readers).toEqual(['conversation']);
    for (const w of list) {
      for (const c of w.pod.containers)
        expect([w.object.metadata.name, c.env?.some((e) => e.name === 'DATABASE_URL') ?? false]).toEqual([
          w.object.metadata.name,
          w.object.metadata.name === 'conversation',
        ]);
    }
    for (const name of SERVICES) {
      const secrets = new Set(secretKeysOf(overlay, objects, workload(name)).map((k) => k.split('/')[0]));
      const own = overlay === 'prod-ha' && name === 'conversation' ? ['bedrock-conversation', 'bedrock-pg-app'] : [`bedrock-${name}`];
      expect([name, [...secrets].sort()]).toEqual([name, own]);
    }
  });

  it('service tokens: web-bff, llm-gateway and conversation mount their own, read-only 0400; conversation and the tool-runner get a peers file; no one else mounts either', () => {
    // Who calls an internal server (presents a token), who serves one to another service (peers).
    const callers = ['web-bff', 'llm-gateway', 'conversation'];
    const servers = ['conversation', 'tool-runner'];
    for (const name of SERVICES) {
      const w = workload(name);
      const c = w.pod.containers[0]!;
      const keys = secretKeysOf(overlay, objects, w);
      const token = env(c, 'BEDROCK_SERVICE_TOKEN_FILE');
      const peers = env(c, 'BEDROCK_SERVICE_PEERS_FILE');
      expect([name, keys.filter((k) => k.endsWith('/service-token'))]).toEqual([
        name,
        callers.includes(name) ? [`bedrock-${name}/service-token`] : [],
      ]);
      expect([name, keys.filter((k) => k.endsWith('/service-peers'))]).toEqual([
        name,
        servers.includes(name) ? [`bedrock-${name}/service-peers`] : [],
      ]);
      expect([name, token !== undefined, peers !== undefined]).toEqual([name, callers.includes(name), servers.includes(name)]);
      for (const [file, key] of [
        [token, 'service-token'],
        [peers, 'service-peers'],
      ] as const) {
        if (file === undefined) continue;
        expect([name, mountedSecretFile(w, c, file)]).toEqual([name, { secret: `bedrock-${name}`, key, mode: 0o400, readOnly: true }]);
      }
    }
    if (overlay === 'dev') {
      const token = (service: string) => secretData(objects, `bedrock-${service}`)['service-token']!;
      const peers = (service: string) => secretData(objects, `bedrock-${service}`)['service-peers']!.trim().split('\n');
      expect(peers('conversation')).toEqual(['web-bff', 'llm-gateway'].map((c) => `${c}:${sha256(token(c))}`));
      // The runners accept the conversation service alone (WorkspaceStorageService).
      expect(peers('tool-runner')).toEqual([`conversation:${sha256(token('conversation'))}`]);
      expect(new Set(callers.map(token)).size).toBe(callers.length);
    }
  });

  it('the tool-runner runs tools as non-root uids, keeps the workspace root its own and can read no credential', () => {
    const w = workload('tool-runner');
    const c = w.pod.containers[0]!;
    const uid = Number(env(c, 'BEDROCK_TOOL_UID'));
    const gid = Number(env(c, 'BEDROCK_TOOL_GID'));
    expect(Number.isInteger(uid) && uid > 0).toBe(true);
    expect(Number.isInteger(gid) && gid > 0).toBe(true);
    // Never a service's uid or group, and not the group volumes are given to (fsGroup).
    const serviceIds = new Set(
      list.flatMap((x) => [x.pod.securityContext?.runAsUser, x.pod.securityContext?.runAsGroup, x.pod.securityContext?.fsGroup]),
    );
    expect(serviceIds.has(uid) || serviceIds.has(gid)).toBe(false);
    expect(w.pod.securityContext?.fsGroup).toBeUndefined();
    // The runner switches with setresuid (no setuid binary): no_new_privs stays; SYS_ADMIN
    // (views, scratch tmpfs, btrfs quotas) is spelled without the CAP_ prefix, never privileged.
    expect(c.securityContext!.allowPrivilegeEscalation).toBe(false);
    expect(c.securityContext!.privileged).toBe(false);
    expect(c.securityContext!.readOnlyRootFilesystem).toBe(true);
    expect(c.securityContext!.capabilities!.add).toContain('SYS_ADMIN');
    expect(c.securityContext!.capabilities!.add!.filter((x) => x.startsWith('CAP_'))).toEqual([]);
    expect((w.pod.securityContext?.seccompProfile ?? c.securityContext?.seccompProfile)?.type).toBe('RuntimeDefault');
    // SYS_ADMIN is outside `baseline`: the namespace enforces `privileged` (else the API refuses the pod).
    const ns = byKind(objects, 'Namespace', namespace).metadata.labels!;
    expect(ns['pod-security.kubernetes.io/enforce']).toBe('privileged');
    expect(ns['pod-security.kubernetes.io/audit']).toBe('restricted');
    // The scratch root is an emptyDir of its own, apart from the runner's /tmp.
    const scratch = env(c, 'BEDROCK_SANDBOX_SCRATCH_ROOT')!;
    const mount = c.volumeMounts!.find((m) => scratch === m.mountPath || scratch.startsWith(`${m.mountPath}/`))!;
    expect(mount.mountPath).not.toBe('/tmp');
    expect((w.pod.volumes ?? []).find((v) => v.name === mount.name)!.emptyDir).toBeDefined();
    // The init container makes the workspace root root's and 0711 (never the tool user's: each
    // workspace is its owner's, 0700), and is the only init container.
    const root = env(c, 'BEDROCK_WORKSPACE_ROOT')!;
    expect(w.pod.initContainers!.map((x) => [x.name, x.command])).toEqual([
      ['workspace-root', ['install', '-d', '-o', '0', '-g', '0', '-m', '0711', root]],
    ]);
    expect(w.pod.initContainers![0]!.volumeMounts).toEqual([{ name: 'workspaces', mountPath: root }]);
    // Its only credential is REDIS_URL (env, read at start); the peers file holds hashes.
    expect(secretKeysOf(overlay, objects, w)).toEqual(['bedrock-tool-runner/REDIS_URL', 'bedrock-tool-runner/service-peers']);
  });

  it('each service connects to Redis as its own ACL user', () => {
    const prefix = (byKind(objects, 'ConfigMap', 'bedrock-config').data as Record<string, string>).BEDROCK_REDIS_PREFIX!;
    for (const name of SERVICES) {
      const ref = workload(name).pod.containers[0]!.env!.find((e) => e.name === 'REDIS_URL')!.valueFrom!.secretKeyRef!;
      expect([name, ref]).toEqual([name, { name: `bedrock-${name}`, key: 'REDIS_URL' }]);
    }
    if (overlay !== 'dev') {
      const keda = (
        byKind(objects, 'TriggerAuthentication', 'bedrock-redis').spec as { secretTargetRef: { parameter: string }[] }
      ).secretTargetRef.map((r) => r.parameter);
      // prod-ha: the redis-cluster scaler takes the nodes' `addresses`.
      expect(keda.sort()).toEqual([overlay === 'prod' ? 'address' : 'addresses', 'password', 'username']);
      return;
    }
    const urls = SERVICES.map((name) => new URL(secretData(objects, `bedrock-${name}`).REDIS_URL!));
    expect(urls.map((u) => decodeURIComponent(u.username))).toEqual(SERVICES.map((s) => redisServiceUser(prefix, s)));
    expect(new Set(urls.map((u) => u.password)).size).toBe(SERVICES.length);
    const acl = secretData(objects, 'bedrock-redis-acl')['users.acl']!;
    expect(acl.trim().split('\n')).toEqual([
      'user default off',
      ...SERVICES.map((s, i) => redisAclFileLine(prefix, s, decodeURIComponent(urls[i]!.password))),
    ]);
    const redis = workload('redis');
    const args = redis.pod.containers[0]!.args!;
    const file = args[args.indexOf('--aclfile') + 1]!;
    const mount = redis.pod.containers[0]!.volumeMounts!.find((m) => file.startsWith(`${m.mountPath}/`))!;
    expect(redis.pod.volumes!.find((v) => v.name === mount.name)!.secret).toEqual({ secretName: 'bedrock-redis-acl', defaultMode: 0o400 });
    expect(file).toBe(`${mount.mountPath}/users.acl`);
  });

  (overlay === 'dev' ? it : it.skip)(
    'dev Postgres: the password comes from a Secret, authentication is scram-sha-256, and DATABASE_URL uses it',
    () => {
      const c = workload('postgres').pod.containers[0]!;
      const ref = c.env!.find((e) => e.name === 'POSTGRES_PASSWORD')!.valueFrom!.secretKeyRef!;
      expect(ref).toEqual({ name: 'bedrock-postgres', key: 'POSTGRES_PASSWORD' });
      expect(env(c, 'POSTGRES_HOST_AUTH_METHOD')).toBe('scram-sha-256');
      expect(env(c, 'POSTGRES_INITDB_ARGS')).toBe('--auth-host=scram-sha-256 --auth-local=scram-sha-256');
      const password = secretData(objects, 'bedrock-postgres').POSTGRES_PASSWORD!;
      expect(password.length).toBeGreaterThan(0);
      expect(decodeURIComponent(new URL(secretData(objects, 'bedrock-conversation').DATABASE_URL!).password)).toBe(password);
    },
  );
});

const redisServer = spawnSync('redis-server', ['--version'], { encoding: 'utf8' }).status === 0;

(redisServer ? describe : describe.skip)('the dev Redis ACL file in a real redis-server', () => {
  const objects = render('dev');
  let dir: string;
  let server: ChildProcess;
  let port: number;
  /** What redis-cli prints, stderr (where a failed AUTH goes) first. */
  const cli = (...args: string[]) => {
    const r = spawnSync('redis-cli', ['-p', String(port), '--no-auth-warning', ...args], { encoding: 'utf8' });
    return `${r.stderr}${r.stdout}`.trim();
  };

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'bedrock-acl-'));
    writeFileSync(join(dir, 'users.acl'), secretData(objects, 'bedrock-redis-acl')['users.acl']!);
    port = await freePort();
    server = spawn(
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--aclfile', join(dir, 'users.acl')],
      { stdio: 'ignore' },
    );
    const deadline = Date.now() + 10_000;
    while (!/NOAUTH|PONG/.test(cli('PING'))) {
      if (Date.now() > deadline || server.exitCode !== null) throw new Error('redis-server did not start with the dev ACL file');
      await new Promise((r) => setTimeout(r, 50));
    }
  });

  afterAll(async () => {
    if (server?.exitCode === null) {
      const exited = new Promise((r) => server.once('exit', r));
      server.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses a connection without credentials and lets each service in with its REDIS_URL, within bedrock:*', () => {
    expect(cli('PING')).toMatch(/^NOAUTH/);
    expect(cli('--user', 'default', '--pass', 'guess', 'PING')).toMatch(/WRONGPASS/);
    for (const name of SERVICES) {
      const url = new URL(secretData(objects, `bedrock-${name}`).REDIS_URL!);
      const as = ['--user', decodeURIComponent(url.username), '--pass', decodeURIComponent(url.password)];
      expect([name, cli(...as, 'SET', `bedrock:probe:${name}`, '1')]).toEqual([name, 'OK']);
      expect([name, cli(...as, 'XADD', `bedrock:conv:${name}:events`, '1-0', 'kind', 'x')]).toEqual([name, '1-0']);
      expect([name, cli(...as, 'GET', 'other:key')]).toEqual([name, expect.stringMatching(/NOPERM/)]);
      expect([name, cli(...as, 'CONFIG', 'GET', 'maxmemory-policy')]).toEqual([name, expect.stringMatching(/NOPERM/)]);
      expect([name, cli(...as, '--pass', 'wrong', 'PING')]).toEqual([name, expect.stringMatching(/WRONGPASS/)]);
    }
  });
});
