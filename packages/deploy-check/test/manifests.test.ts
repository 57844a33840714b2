/**
 * deploy/k8s without a cluster: both overlays render with the real kustomize (`kubectl
 * kustomize`, what `kubectl apply -k` applies), every object is valid
 * against the Kubernetes v1.33 / KEDA v2.10 schemas, and the objects refer to each other
 * correctly (selectors, ports, keys, secrets, scale targets).
 */
import { describe, expect, it } from '@jest/globals';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { objectId, renderKustomization, type K8sObject } from '../src/kustomize.ts';
import { validateObjects } from '../src/validate.ts';
import { crossReferenceProblems, securityProblems, workloads } from '../src/cross-refs.ts';
import { OVERLAYS, SECURITY_EXCEPTIONS, byKind, externalSecrets, render } from './support.ts';

describe('rendering', () => {
  it('renders the expected objects in each overlay', () => {
    const count = (objects: K8sObject[]) =>
      Object.fromEntries([...new Set(objects.map((o) => o.kind))].sort().map((k) => [k, objects.filter((o) => o.kind === k).length]));
    expect(count(render('dev'))).toEqual({
      ConfigMap: 2,
      Deployment: 5,
      Namespace: 1,
      NetworkPolicy: 4,
      PersistentVolumeClaim: 1,
      PodDisruptionBudget: 4,
      Secret: 6,
      Service: 7,
      StatefulSet: 1,
    });
    expect(count(render('prod'))).toEqual({
      ConfigMap: 2,
      Deployment: 4,
      HorizontalPodAutoscaler: 1,
      Namespace: 1,
      NetworkPolicy: 2,
      PersistentVolumeClaim: 1,
      PodDisruptionBudget: 4,
      ScaledObject: 2,
      Service: 5,
      TriggerAuthentication: 1,
    });
    expect(count(render('prod-ha'))).toEqual({
      Cluster: 1,
      ConfigMap: 2,
      Deployment: 4,
      HorizontalPodAutoscaler: 1,
      Job: 1,
      Namespace: 1,
      NetworkPolicy: 4,
      PersistentVolumeClaim: 1,
      PodDisruptionBudget: 4,
      ScaledObject: 2,
      Service: 6,
      StatefulSet: 1,
      TriggerAuthentication: 1,
    });
    for (const o of render('dev'))
      if (o.kind !== 'Namespace') expect([objectId(o), o.metadata.namespace]).toEqual([objectId(o), 'bedrock-dev']);
    for (const o of render('prod'))
      if (o.kind !== 'Namespace') expect([objectId(o), o.metadata.namespace]).toEqual([objectId(o), 'bedrock']);
  });

  it('applies replicas, images, patches and generated config per overlay', () => {
    const dev = render('dev');
    const prod = render('prod');
    const spec = (o: K8sObject) =>
      o.spec as { replicas: number; template: { spec: { containers: { image: string }[]; affinity?: unknown } } };
    for (const name of ['conversation', 'llm-gateway', 'tool-runner', 'web-bff']) {
      expect(spec(byKind(dev, 'Deployment', name)).replicas).toBe(1);
      expect(spec(byKind(dev, 'Deployment', name)).template.spec.containers[0]!.image).toBe(`bedrock/${name}:dev`);
      expect(spec(byKind(prod, 'Deployment', name)).template.spec.containers[0]!.image).toBe(`bedrock/${name}:0.1.0`);
    }
    expect(spec(byKind(prod, 'Deployment', 'conversation')).replicas).toBe(3);
    expect((byKind(dev, 'ConfigMap', 'bedrock-config').data as Record<string, string>).LOG_LEVEL).toBe('debug');
    expect((byKind(prod, 'ConfigMap', 'bedrock-config').data as Record<string, string>).LOG_LEVEL).toBe('info');
    expect((byKind(prod, 'PersistentVolumeClaim', 'bedrock-workspaces').spec as { accessModes: string[] }).accessModes).toEqual([
      'ReadWriteMany',
    ]);
    expect(spec(byKind(dev, 'Deployment', 'tool-runner')).template.spec.affinity).toBeUndefined();
    // The base is not modified by rendering an overlay (objects are fresh per render).
    expect((byKind(render('base'), 'PersistentVolumeClaim', 'bedrock-workspaces').spec as { accessModes: string[] }).accessModes).toEqual([
      'ReadWriteOnce',
    ]);
  });

  it('generates the dev Secrets and ConfigMap without name hashes (the Deployments refer to the plain names)', () => {
    const dev = render('dev');
    for (const o of dev.filter((x) => x.kind === 'Secret' || x.kind === 'ConfigMap')) expect(o.metadata.name).not.toMatch(/-[a-z0-9]{10}$/);
    const secret = byKind(dev, 'Secret', 'bedrock-web-bff').data as Record<string, string>;
    expect(Object.keys(secret).length).toBeGreaterThan(0);
  });

  it("fails with kustomize's own message on a broken kustomization", () => {
    const dir = mkdtempSync(join(tmpdir(), 'kustomize-'));
    try {
      writeFileSync(
        join(dir, 'kustomization.yaml'),
        'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - missing.yaml\n',
      );
      expect(() => renderKustomization(dir)).toThrow(/kustomize .* failed: .*missing\.yaml/s);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('schemas', () => {
  it.each(OVERLAYS)('every object of %s is valid for Kubernetes v1.33, KEDA v2.10 and CloudNativePG 1.30', async (overlay) => {
    expect(await validateObjects(render(overlay))).toEqual([]);
  });

  it('reports invalid objects and unknown kinds', async () => {
    const objects = render('prod');
    (byKind(objects, 'ScaledObject', 'tool-runner').spec as { minReplicaCount: unknown }).minReplicaCount = 'two';
    (byKind(objects, 'Service', 'web-bff').spec as { ports: { port: unknown }[] }).ports[0]!.port = 'http';
    objects.push({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' } });
    const errors = await validateObjects(objects);
    expect(errors.map((e) => e.object).sort()).toEqual(['ScaledObject/tool-runner', 'Service/web-bff', 'Widget/w']);
    expect(errors.find((e) => e.object === 'ScaledObject/tool-runner')!.message).toMatch(/minReplicaCount must be integer/);
  });

  it('checks a CloudNativePG Cluster against its vendored CRD schema: types, enums, unknown fields', async () => {
    const objects = render('prod-ha');
    const spec = byKind(objects, 'Cluster', 'bedrock-pg').spec as Record<string, unknown> & {
      postgresql: { synchronous: Record<string, unknown> };
    };
    spec.instances = 'three';
    spec.postgresql.synchronous.method = 'all';
    spec.storage = { size: '100Gi', sise: '1Gi' };
    const errors = await validateObjects(objects);
    expect(errors.map((e) => e.object)).toEqual(['Cluster/bedrock-pg']);
    const message = errors[0]!.message;
    expect(message).toMatch(/\/spec\/instances must be integer/);
    expect(message).toMatch(/\/spec\/postgresql\/synchronous\/method must be equal to one of the allowed values/);
    expect(message).toMatch(/\/spec\/storage must NOT have additional properties \(sise\)/);
  });
});

describe('web-bff reaches every conversation replica', () => {
  it.each(OVERLAYS)(
    '%s: BEDROCK_CONVERSATION_URL names a headless Service of the conversation pods (their DNS lists each ready pod)',
    (overlay) => {
      const objects = render(overlay);
      const web = byKind(objects, 'Deployment', 'web-bff').spec as {
        template: { spec: { containers: { env: { name: string; value?: string }[] }[] } };
      };
      const value = web.template.spec.containers[0]!.env.find((e) => e.name === 'BEDROCK_CONVERSATION_URL')!.value!;
      const urls = value.split(',').map((u) => new URL(u.trim()));
      expect(urls).toHaveLength(1);
      const svc = byKind(objects, 'Service', urls[0]!.hostname).spec as {
        clusterIP?: string;
        publishNotReadyAddresses?: boolean;
        selector: Record<string, string>;
        ports: { port: number; targetPort: string }[];
      };
      // Not a ClusterIP: one virtual address behind one HTTP/2 connection would pin every call to one pod.
      expect(svc.clusterIP).toBe('None');
      expect(svc.publishNotReadyAddresses ?? false).toBe(false);
      expect(svc.selector).toEqual({ 'app.kubernetes.io/name': 'conversation' });
      const port = svc.ports.find((p) => p.port === Number(urls[0]!.port));
      expect(port?.targetPort).toBe('grpc');
    },
  );
});

describe('cross-references', () => {
  it.each(OVERLAYS)('%s: selectors, ports, keys, secrets and scale targets all resolve', (overlay) => {
    expect(crossReferenceProblems(render(overlay), externalSecrets(overlay))).toEqual([]);
  });

  it('finds broken references', () => {
    const objects = render('prod');
    const svc = byKind(objects, 'Service', 'conversation').spec as { ports: { targetPort: string }[] };
    svc.ports[0]!.targetPort = 'grcp';
    const pdb = byKind(objects, 'PodDisruptionBudget', 'web-bff').spec as { selector: { matchLabels: Record<string, string> } };
    pdb.selector.matchLabels = { 'app.kubernetes.io/name': 'web-bf' };
    const hpa = byKind(objects, 'HorizontalPodAutoscaler', 'web-bff').spec as { scaleTargetRef: { name: string } };
    hpa.scaleTargetRef.name = 'webbff';
    const runner = byKind(objects, 'Deployment', 'tool-runner').spec as {
      template: {
        spec: {
          containers: {
            env: { name: string; valueFrom?: { secretKeyRef?: { key: string } } }[];
            startupProbe: { grpc: { port: number } };
          }[];
        };
      };
    };
    runner.template.spec.containers[0]!.env.find((e) => e.name === 'REDIS_URL')!.valueFrom!.secretKeyRef!.key = 'REDIS';
    runner.template.spec.containers[0]!.startupProbe.grpc.port = 50052;
    const problems = crossReferenceProblems(objects, externalSecrets('prod'));
    expect(problems).toEqual(
      expect.arrayContaining([
        'Service/conversation: targetPort grcp is not a container port of Deployment/conversation',
        'PodDisruptionBudget/web-bff: selector selects no pod template',
        'HorizontalPodAutoscaler/web-bff: scaleTargetRef Deployment/webbff does not exist',
        'Deployment/tool-runner: tool-runner env REDIS_URL refers to missing Secret key bedrock-tool-runner/REDIS',
        'Deployment/tool-runner: tool-runner startupProbe uses port 50052, which the container does not declare',
      ]),
    );
    expect(problems).toHaveLength(5);
    // Without the list of external secrets, prod's references to them are all reported.
    const unlisted = crossReferenceProblems(render('prod'));
    for (const name of Object.keys(externalSecrets('prod'))) expect([name, unlisted.some((p) => p.includes(name))]).toEqual([name, true]);
    expect(unlisted.length).toBeGreaterThanOrEqual(10);
    // A secret volume item must name an existing key.
    const web = byKind(objects, 'Deployment', 'web-bff').spec as {
      template: { spec: { volumes: { name: string; secret?: { items: { key: string }[] } }[] } };
    };
    web.template.spec.volumes.find((v) => v.secret)!.secret!.items[0]!.key = 'service-tokn';
    expect(crossReferenceProblems(objects, externalSecrets('prod'))).toContain(
      'Deployment/web-bff: volume service-identity refers to missing Secret key bedrock-web-bff/service-tokn',
    );
  });

  it.each(OVERLAYS)(
    '%s: every container runs non-root, unprivileged, read-only, RuntimeDefault seccomp, with requests and limits (the tool-runner: root with its reviewed capabilities)',
    (overlay) => {
      expect(securityProblems(workloads(render(overlay)), SECURITY_EXCEPTIONS)).toEqual([]);
      // Without the exception the runner is reported; with one more capability too.
      const runner = workloads(render(overlay)).filter((w) => w.object.metadata.name === 'tool-runner');
      expect(securityProblems(runner)).toEqual(
        expect.arrayContaining([
          'Deployment/tool-runner tool-runner: runs as uid 0',
          'Deployment/tool-runner tool-runner: capabilities are not all dropped',
        ]),
      );
      runner[0]!.pod.containers[0]!.securityContext!.capabilities!.add!.push('NET_ADMIN');
      expect(securityProblems(runner, SECURITY_EXCEPTIONS)).toEqual([
        'Deployment/tool-runner tool-runner: capabilities are not ALL dropped plus exactly CHOWN, DAC_OVERRIDE, FOWNER, KILL, SETGID, SETPCAP, SETUID, SYS_ADMIN',
        'Deployment/tool-runner tool-runner: capability NET_ADMIN is outside the baseline Pod Security Standard',
      ]);
      // SYS_ADMIN passes only as the runner's reviewed exception.
      const { beyondBaseline: _reviewed, ...withoutReview } = SECURITY_EXCEPTIONS['tool-runner/tool-runner']!;
      expect(
        securityProblems(
          workloads(render(overlay)).filter((w) => w.object.metadata.name === 'tool-runner'),
          {
            ...SECURITY_EXCEPTIONS,
            'tool-runner/tool-runner': withoutReview,
          },
        ),
      ).toEqual(['Deployment/tool-runner tool-runner: capability SYS_ADMIN is outside the baseline Pod Security Standard']);
      const broken = render(overlay);
      const web = workloads(broken).find((w) => w.object.metadata.name === 'web-bff')!;
      web.pod.containers[0]!.securityContext!.allowPrivilegeEscalation = true;
      web.pod.containers[0]!.securityContext!.capabilities = { drop: ['ALL'], add: ['NET_ADMIN'] };
      expect(securityProblems([web])).toEqual([
        'Deployment/web-bff web-bff: allowPrivilegeEscalation is not false',
        'Deployment/web-bff web-bff: capabilities are not all dropped',
      ]);
    },
  );
});
