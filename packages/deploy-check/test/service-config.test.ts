/**
 * The rendered manifests against the services' own code: every variable a pod gets is one its
 * service reads, the whole environment parses with the service's config reader, shutdown
 * grace fits in the termination grace period, KEDA watches the real queue keys, and the
 * prod tool-runners sit on Landlock nodes behind a tight NetworkPolicy.
 */
import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { QUEUE_LLM_REQUESTS, QUEUE_TOOL_EXEC, QUEUE_TOOL_EXEC_RESTRICTED } from '@bedrock/contracts';
import { redisKeys } from '@bedrock/platform';
import { conversationConfigSchema, readConversationConfig } from '../../../services/conversation/src/config.ts';
import { llmGatewayConfigSchema, readLlmGatewayConfig } from '../../../services/llm-gateway/src/config.ts';
import { readToolRunnerConfig, toolRunnerConfigSchema } from '../../../services/tool-runner/src/config.ts';
import { readWebBffConfig, webBffConfigSchema } from '../../../services/web-bff/src/config.ts';
import { describeConfig } from '@bedrock/platform/config';
import type { K8sObject } from '../src/kustomize.ts';
import { workloads, type Workload } from '../src/cross-refs.ts';
import { OVERLAYS, TOOL_RUNNER_CAPABILITIES, byKind, durationMs, render, type Overlay } from './support.ts';

const SERVICES: Record<string, { reads: string[]; parse: (env: Record<string, string>) => unknown }> = {
  conversation: { reads: describeConfig(conversationConfigSchema).map((r) => r.env), parse: (env) => readConversationConfig(env) },
  'llm-gateway': { reads: describeConfig(llmGatewayConfigSchema).map((r) => r.env), parse: (env) => readLlmGatewayConfig(env) },
  'tool-runner': { reads: describeConfig(toolRunnerConfigSchema).map((r) => r.env), parse: (env) => readToolRunnerConfig(env) },
  'web-bff': { reads: describeConfig(webBffConfigSchema).map((r) => r.env), parse: (env) => readWebBffConfig(env) },
};

/** The environment a container would see; Secret values decoded (prod's external ones get a sample value). */
function containerEnv(objects: K8sObject[], w: Workload): Record<string, string> {
  const c = w.pod.containers[0]!;
  const data = (kind: string, name: string): Record<string, string> => {
    const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
    const d = (o?.data ?? {}) as Record<string, string>;
    return kind === 'Secret' ? Object.fromEntries(Object.entries(d).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()])) : d;
  };
  const sample: Record<string, string> = {
    DATABASE_URL: 'postgres://bedrock:secret@db.internal:5432/bedrock',
    REDIS_URL: 'rediss://:secret@redis.internal:6380',
    ANTHROPIC_API_KEY: 'sk-ant-sample',
    // CloudNativePG's application Secret (prod-ha): its `uri` names the `-rw` Service.
    uri: 'postgresql://bedrock:secret@bedrock-pg-rw.bedrock:5432/bedrock',
    BEDROCK_TOKENS: `ops:${'a'.repeat(64)}`,
  };
  const env: Record<string, string> = {};
  for (const from of c.envFrom ?? [])
    Object.assign(env, from.configMapRef ? data('ConfigMap', from.configMapRef.name) : data('Secret', from.secretRef!.name));
  for (const e of c.env ?? []) {
    const sk = e.valueFrom?.secretKeyRef;
    const cm = e.valueFrom?.configMapKeyRef;
    if (e.value !== undefined) env[e.name] = e.value;
    else if (sk) env[e.name] = data('Secret', sk.name)[sk.key] ?? sample[sk.key] ?? 'x';
    else if (cm) env[e.name] = data('ConfigMap', cm.name)[cm.key]!;
    else env[e.name] = 'pod-name-1';
  }
  return env;
}

const bedrock = (overlay: Overlay) => workloads(render(overlay)).filter((w) => w.object.metadata.name in SERVICES);

describe('service configuration in the manifests', () => {
  it.each(OVERLAYS)('%s: every variable set on a container is read by its service, and the environment parses', (overlay) => {
    const objects = render(overlay);
    const list = bedrock(overlay);
    expect(list.map((w) => w.object.metadata.name).sort()).toEqual(Object.keys(SERVICES).sort());
    for (const w of list) {
      const svc = SERVICES[w.object.metadata.name]!;
      const explicit = (w.pod.containers[0]!.env ?? []).map((e) => e.name);
      expect([w.object.metadata.name, explicit.filter((n) => !svc.reads.includes(n))]).toEqual([w.object.metadata.name, []]);
      expect(() => svc.parse(containerEnv(objects, w))).not.toThrow();
    }
    // Every shared setting is read by at least one service.
    const shared = Object.keys(byKind(objects, 'ConfigMap', 'bedrock-config').data as object);
    expect(shared.filter((n) => !Object.values(SERVICES).some((s) => s.reads.includes(n)))).toEqual([]);
  });

  it('a mistyped variable or a bad value is caught', () => {
    const objects = render('dev');
    const w = bedrock('dev').find((x) => x.object.metadata.name === 'web-bff')!;
    w.pod.containers[0]!.env!.find((e) => e.name === 'BEDROCK_GRPC_PORT')!.value = '70000';
    expect(() => SERVICES['web-bff']!.parse(containerEnv(objects, w))).toThrow(/BEDROCK_GRPC_PORT/);
  });

  it.each(OVERLAYS)('%s: the termination grace period covers preStop plus two shutdown graces (jobs, then RPCs)', (overlay) => {
    const objects = render(overlay);
    for (const w of bedrock(overlay)) {
      const env = containerEnv(objects, w);
      const graceS = durationMs(env.BEDROCK_SHUTDOWN_GRACE!) / 1000;
      const preStop = w.pod.containers[0]!.lifecycle?.preStop?.sleep?.seconds ?? 0;
      const needed = preStop + 2 * graceS + 5;
      expect([w.object.metadata.name, (w.pod.terminationGracePeriodSeconds ?? 30) >= needed]).toEqual([w.object.metadata.name, true]);
    }
  });

  it('every service is ready by its /readyz (dependencies included); the gRPC servers start by grpc.health.v1 on their gRPC port', () => {
    const dev = bedrock('dev');
    const container = (name: string) => dev.find((w) => w.object.metadata.name === name)!.pod.containers[0]!;
    for (const name of ['conversation', 'tool-runner', 'web-bff', 'llm-gateway']) {
      expect([name, container(name).readinessProbe!.httpGet]).toEqual([name, { path: '/readyz', port: 'metrics' }]);
    }
    expect(container('conversation').startupProbe!.grpc!.port).toBe(50051);
    expect(container('tool-runner').startupProbe!.grpc!.port).toBe(50053);
    expect(container('web-bff').startupProbe!.grpc!.port).toBe(8081);
  });

  it('the dev token is the documented one', () => {
    const secret = byKind(render('dev'), 'Secret', 'bedrock-web-bff').data as Record<string, string>;
    const tokens = Buffer.from(secret.BEDROCK_TOKENS!, 'base64').toString();
    expect(tokens).toBe(`dev:${createHash('sha256').update('bedrock-dev-token').digest('hex')}`);
  });
});

describe('prod scaling, network and placement', () => {
  const prod = render('prod');
  const prefix = (byKind(prod, 'ConfigMap', 'bedrock-config').data as Record<string, string>).BEDROCK_REDIS_PREFIX;
  const lists = (name: string) =>
    (byKind(prod, 'ScaledObject', name).spec as { triggers: { type: string; metadata: { listName: string } }[] }).triggers.map((t) => [
      t.type,
      t.metadata.listName,
    ]);

  it('KEDA scales the gateway and the runners on the BullMQ wait lists of their queues', () => {
    const keys = redisKeys(prefix!);
    expect(lists('llm-gateway')).toEqual([['redis', keys.bullKey(QUEUE_LLM_REQUESTS, 'wait')]]);
    expect(lists('tool-runner')).toEqual([
      ['redis', keys.bullKey(QUEUE_TOOL_EXEC, 'wait')],
      ['redis', keys.bullKey(QUEUE_TOOL_EXEC_RESTRICTED, 'wait')],
    ]);
    expect(
      (byKind(prod, 'HorizontalPodAutoscaler', 'web-bff').spec as { metrics: { resource: { name: string } }[] }).metrics[0]!.resource.name,
    ).toBe('cpu');
  });

  it('prod-ha: KEDA sums the wait lists of every partition of the queues, with the names the services use', () => {
    const ha = render('prod-ha');
    const config = byKind(ha, 'ConfigMap', 'bedrock-config').data as Record<string, string>;
    expect([config.BEDROCK_REDIS_CLUSTER, config.BEDROCK_QUEUE_PARTITIONS]).toEqual(['on', '3']);
    const keys = redisKeys(config.BEDROCK_REDIS_PREFIX!, { queuePartitions: Number(config.BEDROCK_QUEUE_PARTITIONS) });
    const waits = (queue: string) => Array.from({ length: keys.queuePartitions }, (_, p) => keys.bullKey(queue, 'wait', p));
    const scaled = (name: string) =>
      byKind(ha, 'ScaledObject', name).spec as {
        advanced: { scalingModifiers: { formula: string } };
        triggers: { type: string; name: string; metadata: { listName: string } }[];
      };
    for (const [name, queues] of [
      ['llm-gateway', [QUEUE_LLM_REQUESTS]],
      ['tool-runner', [QUEUE_TOOL_EXEC, QUEUE_TOOL_EXEC_RESTRICTED]],
    ] as const) {
      const spec = scaled(name);
      expect(spec.triggers.map((t) => [t.type, t.metadata.listName])).toEqual(queues.flatMap(waits).map((list) => ['redis-cluster', list]));
      // The formula adds every trigger once.
      expect(
        spec.advanced.scalingModifiers.formula
          .split('+')
          .map((t) => t.trim())
          .sort(),
      ).toEqual(spec.triggers.map((t) => t.name).sort());
    }
  });

  it('prod-ha: Postgres by CloudNativePG with a synchronous standby; the conversation service on its -rw Service', () => {
    const ha = render('prod-ha');
    const pg = byKind(ha, 'Cluster', 'bedrock-pg').spec as { instances: number; postgresql: { synchronous: Record<string, unknown> } };
    expect(pg.instances).toBe(3);
    expect(pg.postgresql.synchronous).toEqual({ method: 'any', number: 1, dataDurability: 'required' });
    const conversation = workloads(ha).find((w) => w.object.metadata.name === 'conversation')!;
    const env = conversation.pod.containers[0]!.env!.find((e) => e.name === 'DATABASE_URL')!;
    // The Secret CloudNativePG makes for the application user: its `uri` names `<cluster>-rw`.
    expect(env.valueFrom).toEqual({ secretKeyRef: { name: 'bedrock-pg-app', key: 'uri' } });
    const redis = byKind(ha, 'StatefulSet', 'redis-cluster').spec as {
      replicas: number;
      template: { spec: { containers: { args: string[] }[] } };
    };
    expect(redis.replicas).toBe(6);
    const args = redis.template.spec.containers[0]!.args.join(' ');
    expect(args).toContain('--cluster-enabled yes');
    expect(args).toContain('--maxmemory-policy noeviction');
  });

  it('tool-runners: Landlock nodes only, the reviewed capabilities, egress only to DNS, Redis and the internet', () => {
    const runner = workloads(prod).find((w) => w.object.metadata.name === 'tool-runner')!;
    const affinity = (
      runner.pod as unknown as {
        affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: unknown[] } } };
      }
    ).affinity;
    expect(affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms).toEqual([
      { matchExpressions: [{ key: 'bedrock.dev/landlock', operator: 'In', values: ['true'] }] },
    ]);
    expect(runner.pod.containers[0]!.securityContext!.capabilities).toEqual({ drop: ['ALL'], add: TOOL_RUNNER_CAPABILITIES });
    const np = byKind(prod, 'NetworkPolicy', 'tool-runner').spec as {
      policyTypes: string[];
      egress: { to?: { ipBlock?: { cidr: string; except: string[] } }[]; ports?: { protocol: string; port: number }[] }[];
    };
    expect(np.policyTypes).toEqual(['Ingress', 'Egress']);
    // DNS only to kube-dns; only the Redis ports may go to any address; all other ports only
    // outside the private, shared, link-local and loopback ranges.
    expect(np.egress.flatMap((r) => (r.ports ?? []).map((p) => `${p.protocol}/${p.port}`)).sort()).toEqual([
      'TCP/53',
      'TCP/6379',
      'TCP/6380',
      'UDP/53',
    ]);
    expect(np.egress.find((r) => r.ports?.some((p) => p.port === 53))!.to).toHaveLength(1);
    const internet = np.egress.find((r) => !r.ports)!;
    expect(internet.to!.map((p) => p.ipBlock!.cidr)).toEqual(['0.0.0.0/0', '::/0']);
    expect(internet.to![0]!.ipBlock!.except).toEqual(
      expect.arrayContaining(['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16']),
    );
  });
});
