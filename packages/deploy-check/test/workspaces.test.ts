/**
 * Workspaces on Kubernetes (docs/deploy.md, "Workspaces"): the conversation service keeps the
 * records and calls the tool-runners' WorkspaceStorageService with its own token; every runner
 * mounts the one workspace volume at BEDROCK_WORKSPACE_ROOT; both agree on BEDROCK_TOOL_UIDS;
 * the network lets exactly that call through.
 */
import { describe, expect, it } from '@jest/globals';
import { createHash } from 'node:crypto';
import { connectionAllowed, selects, workloads, type Container, type Workload } from '../src/cross-refs.ts';
import type { K8sObject } from '../src/kustomize.ts';
import { OVERLAYS, byKind, externalSecrets, render } from './support.ts';

const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

/** A container's variable as the pod sees it: a literal, or resolved through a ConfigMap. */
function envValue(objects: K8sObject[], c: Container, name: string): string | undefined {
  const e = c.env?.find((x) => x.name === name);
  if (!e) return undefined;
  if (e.value !== undefined) return e.value;
  const ref = e.valueFrom?.configMapKeyRef;
  if (!ref) throw new Error(`${name}: only literals and configMapKeyRef are resolved here`);
  return (byKind(objects, 'ConfigMap', ref.name).data as Record<string, string>)[ref.key];
}

describe.each(OVERLAYS)('%s: workspaces', (overlay) => {
  const objects = render(overlay);
  const list = workloads(objects);
  const conversation = list.find((w) => w.object.metadata.name === 'conversation')!;
  const conv = conversation.pod.containers[0]!;
  // Every runner workload (one today; a second one, say for other nodes, is checked alike).
  const runners = list.filter((w) => w.labels['app.kubernetes.io/component'] === 'tool-runner');
  const runnerContainer = (w: Workload) => w.pod.containers.find((c) => c.name === 'tool-runner')!;

  it('finds the workloads', () => {
    expect(runners.map((w) => w.object.metadata.name)).toEqual(['tool-runner']);
  });

  it('the conversation service reaches every ready runner through BEDROCK_WORKSPACE_STORAGE_URL, with its own token, host paths off', () => {
    const urls = envValue(objects, conv, 'BEDROCK_WORKSPACE_STORAGE_URL')!
      .split(',')
      .map((u) => new URL(u.trim()));
    expect(urls).toHaveLength(1);
    const url = urls[0]!;
    expect(url.protocol).toBe('http:');
    const svc = byKind(objects, 'Service', url.hostname).spec as {
      clusterIP?: string;
      publishNotReadyAddresses?: boolean;
      selector: Record<string, string>;
      ports: { port: number; targetPort: string }[];
    };
    // Headless (one address per ready runner, re-resolved), selecting every runner and no other pod.
    expect(svc.clusterIP).toBe('None');
    expect(svc.publishNotReadyAddresses ?? false).toBe(false);
    expect(list.filter((w) => selects({ matchLabels: svc.selector }, w.labels))).toEqual(runners);
    const port = svc.ports.find((p) => p.port === Number(url.port))!;
    expect(port.targetPort).toBe('grpc');
    for (const w of runners) {
      const c = runnerContainer(w);
      expect(c.ports!.find((p) => p.name === 'grpc')!.containerPort).toBe(Number(envValue(objects, c, 'BEDROCK_GRPC_PORT')));
      expect(Number(envValue(objects, c, 'BEDROCK_GRPC_PORT'))).toBe(Number(url.port));
    }
    // Its own token, presented to the runners (trust-boundaries.test.ts checks the mount).
    expect(envValue(objects, conv, 'BEDROCK_SERVICE_TOKEN_FILE')).toBe('/var/run/secrets/bedrock/token');
    // Host paths stay at their default, off (a host path would be any runner's directory).
    expect(envValue(objects, conv, 'BEDROCK_HOST_PATHS') ?? 'off').toBe('off');
    expect((conv.envFrom ?? []).filter((f) => f.configMapRef).map((f) => f.configMapRef!.name)).toEqual(['bedrock-config']);
    expect(Object.keys(byKind(objects, 'ConfigMap', 'bedrock-config').data as object)).not.toContain('BEDROCK_HOST_PATHS');
  });

  it("the runners' peers file lists the conversation service", () => {
    for (const w of runners) {
      const c = runnerContainer(w);
      const file = envValue(objects, c, 'BEDROCK_SERVICE_PEERS_FILE')!;
      const mount = c.volumeMounts!.find((m) => file.startsWith(`${m.mountPath}/`))!;
      const secret = w.pod.volumes!.find((v) => v.name === mount.name)!.secret!;
      const item = secret.items!.find((i) => `${mount.mountPath}/${i.path}` === file)!;
      expect([secret.secretName, item.key]).toEqual(['bedrock-tool-runner', 'service-peers']);
      if (overlay !== 'dev') {
        expect(externalSecrets(overlay)['bedrock-tool-runner']).toContain('service-peers');
        expect(externalSecrets(overlay)['bedrock-conversation']).toContain('service-token');
        continue;
      }
      const data = (name: string, key: string) =>
        Buffer.from((byKind(objects, 'Secret', name).data as Record<string, string>)[key]!, 'base64').toString();
      const names = data('bedrock-tool-runner', 'service-peers')
        .split('\n')
        .map((l) => l.trim())
        .filter((l) => l && !l.startsWith('#'));
      expect(names).toContain(`conversation:${sha256(data('bedrock-conversation', 'service-token'))}`);
    }
  });

  it('every runner mounts the one workspace volume at BEDROCK_WORKSPACE_ROOT; the conversation service does not mount it', () => {
    const claims = new Set<string>();
    for (const w of runners) {
      const c = runnerContainer(w);
      const root = envValue(objects, c, 'BEDROCK_WORKSPACE_ROOT')!;
      expect(root).toMatch(/^\/\S+/);
      const mount = c.volumeMounts!.find((m) => m.mountPath === root)!;
      expect([w.object.metadata.name, mount?.readOnly ?? false]).toEqual([w.object.metadata.name, false]);
      const volume = w.pod.volumes!.find((v) => v.name === mount.name)!;
      expect(volume.persistentVolumeClaim).toBeDefined();
      claims.add(volume.persistentVolumeClaim!.claimName);
      // The image option loop-mounts a file: no loop devices in an unprivileged pod.
      expect(envValue(objects, c, 'BEDROCK_WORKSPACE_IMAGE')).toBeUndefined();
    }
    expect(claims.size).toBe(1);
    const claim = byKind(objects, 'PersistentVolumeClaim', [...claims][0]!).spec as { accessModes: string[] };
    // More than one runner (replicas or an autoscaler's maximum): the volume is shared across nodes.
    const most = Math.max(
      ...runners.map((w) => (w.object.spec as { replicas?: number }).replicas ?? 1),
      ...objects
        .filter((o) => o.kind === 'ScaledObject' || o.kind === 'HorizontalPodAutoscaler')
        .filter((o) => runners.some((w) => (o.spec as { scaleTargetRef: { name: string } }).scaleTargetRef.name === w.object.metadata.name))
        .map(
          (o) =>
            ((o.spec as { maxReplicaCount?: number; maxReplicas?: number }).maxReplicaCount ??
              (o.spec as { maxReplicas?: number }).maxReplicas)!,
        ),
    );
    expect(claim.accessModes).toEqual(most > 1 ? ['ReadWriteMany'] : ['ReadWriteOnce']);
    expect(conversation.pod.volumes?.some((v) => v.persistentVolumeClaim) ?? false).toBe(false);
  });

  it('BEDROCK_TOOL_UIDS is set once, the same for the conversation service and every runner', () => {
    const refs = [conv, ...runners.map(runnerContainer)].map((c) => c.env!.find((e) => e.name === 'BEDROCK_TOOL_UIDS')!.valueFrom);
    expect(new Set(refs.map((r) => JSON.stringify(r))).size).toBe(1);
    expect(refs[0]).toEqual({ configMapKeyRef: { name: 'bedrock-workspace-config', key: 'BEDROCK_TOOL_UIDS' } });
    const values = [conv, ...runners.map(runnerContainer)].map((c) => envValue(objects, c, 'BEDROCK_TOOL_UIDS'));
    expect(new Set(values).size).toBe(1);
    const [first, last] = values[0]!.split('-').map(Number) as [number, number];
    expect(first >= 1000 && last >= first).toBe(true);
    // Clear of every pod's own uid and group, and of the host-path tool user.
    for (const w of list) {
      for (const id of [w.pod.securityContext?.runAsUser, w.pod.securityContext?.runAsGroup, w.pod.securityContext?.fsGroup])
        if (id !== undefined) expect([w.object.metadata.name, id >= first && id <= last]).toEqual([w.object.metadata.name, false]);
    }
    for (const w of runners) expect(Number(envValue(objects, runnerContainer(w), 'BEDROCK_TOOL_UID')) < first).toBe(true);
  });

  it("the NetworkPolicies let the conversation service reach every runner's gRPC port", () => {
    const from = { pod: { namespace: conversation.namespace, labels: conversation.labels } };
    for (const w of runners) {
      const port = Number(envValue(objects, runnerContainer(w), 'BEDROCK_GRPC_PORT'));
      expect(connectionAllowed(objects, from, { pod: { namespace: w.namespace, labels: w.labels } }, port)).toBe(true);
    }
  });
});
