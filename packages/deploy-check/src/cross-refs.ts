/**
 * Checks what schemas cannot: that the rendered objects refer to each other correctly.
 * Each check returns human-readable problems; an empty list means the overlay is coherent.
 */
import { BlockList, isIP } from 'node:net';
import type { K8sObject } from './kustomize.ts';

/** Secrets an overlay references but does not render (created outside git), with their keys. */
export type ExternalSecrets = Record<string, string[]>;

interface ContainerPort {
  name?: string;
  containerPort: number;
}
interface Probe {
  grpc?: { port: number };
  httpGet?: { port: number | string };
  tcpSocket?: { port: number | string };
}
interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: { configMapKeyRef?: { name: string; key: string }; secretKeyRef?: { name: string; key: string } };
}
export interface Container {
  name: string;
  image?: string;
  ports?: ContainerPort[];
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  startupProbe?: Probe;
  readinessProbe?: Probe;
  livenessProbe?: Probe;
  lifecycle?: { preStop?: { sleep?: { seconds: number } } };
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  securityContext?: {
    runAsNonRoot?: boolean;
    allowPrivilegeEscalation?: boolean;
    readOnlyRootFilesystem?: boolean;
    privileged?: boolean;
    capabilities?: { drop?: string[]; add?: string[] };
    seccompProfile?: { type: string };
  };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
  command?: string[];
  args?: string[];
}
export interface SecretVolumeSource {
  secretName: string;
  defaultMode?: number;
  items?: { key: string; path: string }[];
}
export interface PodSpec {
  containers: Container[];
  initContainers?: Container[];
  terminationGracePeriodSeconds?: number;
  securityContext?: {
    runAsNonRoot?: boolean;
    runAsUser?: number;
    runAsGroup?: number;
    fsGroup?: number;
    seccompProfile?: { type: string };
  };
  volumes?: {
    name: string;
    persistentVolumeClaim?: { claimName: string };
    configMap?: { name: string };
    secret?: SecretVolumeSource;
    emptyDir?: { sizeLimit?: string };
  }[];
}
export interface Workload {
  readonly object: K8sObject;
  readonly namespace: string;
  readonly labels: Record<string, string>;
  readonly pod: PodSpec;
}
type Selector = { matchLabels?: Record<string, string>; matchExpressions?: { key: string; operator: string; values?: string[] }[] };

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet', 'ReplicaSet', 'Job']);

/** Pod templates of the workloads, with their namespace and pod labels. */
export function workloads(objects: K8sObject[]): Workload[] {
  return objects
    .filter((o) => WORKLOAD_KINDS.has(o.kind))
    .map((o) => {
      const template = (o.spec as { template: { metadata?: { labels?: Record<string, string> }; spec: PodSpec } }).template;
      return { object: o, namespace: o.metadata.namespace ?? '', labels: template.metadata?.labels ?? {}, pod: template.spec };
    });
}

/**
 * Pods an operator makes from a custom resource (not rendered, so only their labels are known):
 * a CloudNativePG `Cluster`'s instances carry `cnpg.io/cluster: <name>` and `cnpg.io/podRole: instance`.
 */
export function operatorPods(objects: K8sObject[]): { object: K8sObject; namespace: string; labels: Record<string, string> }[] {
  return objects
    .filter((o) => o.apiVersion.startsWith('postgresql.cnpg.io/') && o.kind === 'Cluster')
    .map((o) => ({
      object: o,
      namespace: o.metadata.namespace ?? '',
      labels: { 'cnpg.io/cluster': o.metadata.name, 'cnpg.io/podRole': 'instance' },
    }));
}

/** Whether a label selector selects a set of labels (an empty selector selects everything). */
export function selects(selector: Selector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = e.key in labels;
    const value = labels[e.key];
    if (e.operator === 'In' && !(has && e.values!.includes(value!))) return false;
    if (e.operator === 'NotIn' && has && e.values!.includes(value!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

function containersOf(pod: PodSpec): Container[] {
  return [...pod.containers, ...(pod.initContainers ?? [])];
}

function hasPort(c: Container, port: number | string): boolean {
  return (c.ports ?? []).some((p) => (typeof port === 'number' ? p.containerPort === port : p.name === port));
}

/** Every check below, concatenated. */
export function crossReferenceProblems(objects: K8sObject[], external: ExternalSecrets = {}): string[] {
  const pods = workloads(objects);
  const find = (kind: string, ns: string, name: string) =>
    objects.find((o) => o.kind === kind && (o.metadata.namespace ?? '') === ns && o.metadata.name === name);
  const problems: string[] = [];
  const ns = (o: K8sObject) => o.metadata.namespace ?? '';
  const operated = operatorPods(objects);
  const podsSelectedBy = (o: K8sObject, selector: Selector | undefined) => [
    ...pods.filter((w) => w.namespace === ns(o) && selects(selector, w.labels)),
    ...operated.filter((p) => p.namespace === ns(o) && selects(selector, p.labels)),
  ];

  // Workload selectors select their own template (a Job's is generated by the API server).
  for (const w of pods) {
    const selector = (w.object.spec as { selector?: Selector }).selector;
    if (w.object.kind === 'Job' && selector === undefined) continue;
    if (!selects(selector, w.labels))
      problems.push(`${w.object.kind}/${w.object.metadata.name}: spec.selector does not match its pod template labels`);
  }

  // Services: the selector selects pods, each targetPort is a port of every selected pod.
  for (const svc of objects.filter((o) => o.kind === 'Service')) {
    const spec = svc.spec as { selector?: Record<string, string>; ports: { name?: string; port: number; targetPort?: number | string }[] };
    const selected = podsSelectedBy(svc, { matchLabels: spec.selector ?? {} });
    if (!spec.selector || selected.length === 0) problems.push(`Service/${svc.metadata.name}: selector selects no pod template`);
    for (const p of spec.ports) {
      const target = p.targetPort ?? p.port;
      for (const w of selected) {
        // An operator's pods: their ports are the operator's (not rendered).
        if (!('pod' in w)) continue;
        if (!w.pod.containers.some((c) => hasPort(c, target)))
          problems.push(
            `Service/${svc.metadata.name}: targetPort ${target} is not a container port of ${w.object.kind}/${w.object.metadata.name}`,
          );
      }
    }
  }

  // Probes use declared ports; env and volumes refer to existing ConfigMaps, Secrets, keys and claims.
  const keyExists = (kind: 'ConfigMap' | 'Secret', namespace: string, name: string, key?: string): boolean => {
    const o = find(kind, namespace, name);
    if (o)
      return (
        key === undefined ||
        Object.hasOwn((o.data as Record<string, string>) ?? {}, key) ||
        Object.hasOwn((o.stringData as Record<string, string>) ?? {}, key)
      );
    return kind === 'Secret' && name in external && (key === undefined || external[name]!.includes(key));
  };
  for (const w of pods) {
    const where = `${w.object.kind}/${w.object.metadata.name}`;
    for (const c of containersOf(w.pod)) {
      for (const [kind, probe] of [
        ['startupProbe', c.startupProbe],
        ['readinessProbe', c.readinessProbe],
        ['livenessProbe', c.livenessProbe],
      ] as const) {
        if (!probe) continue;
        const port = probe.grpc?.port ?? probe.httpGet?.port ?? probe.tcpSocket?.port;
        if (port !== undefined && !hasPort(c, port))
          problems.push(`${where}: ${c.name} ${kind} uses port ${port}, which the container does not declare`);
      }
      for (const e of c.env ?? []) {
        const cm = e.valueFrom?.configMapKeyRef;
        const sk = e.valueFrom?.secretKeyRef;
        if (cm && !keyExists('ConfigMap', w.namespace, cm.name, cm.key))
          problems.push(`${where}: ${c.name} env ${e.name} refers to missing ConfigMap key ${cm.name}/${cm.key}`);
        if (sk && !keyExists('Secret', w.namespace, sk.name, sk.key))
          problems.push(`${where}: ${c.name} env ${e.name} refers to missing Secret key ${sk.name}/${sk.key}`);
      }
      for (const from of c.envFrom ?? []) {
        if (from.configMapRef && !keyExists('ConfigMap', w.namespace, from.configMapRef.name))
          problems.push(`${where}: ${c.name} envFrom refers to missing ConfigMap ${from.configMapRef.name}`);
        if (from.secretRef && !keyExists('Secret', w.namespace, from.secretRef.name))
          problems.push(`${where}: ${c.name} envFrom refers to missing Secret ${from.secretRef.name}`);
      }
      for (const m of c.volumeMounts ?? []) {
        const claimTemplates = (
          (w.object.spec as { volumeClaimTemplates?: { metadata: { name: string } }[] }).volumeClaimTemplates ?? []
        ).map((t) => t.metadata.name);
        if (!(w.pod.volumes ?? []).some((v) => v.name === m.name) && !claimTemplates.includes(m.name))
          problems.push(`${where}: ${c.name} mounts undeclared volume ${m.name}`);
      }
    }
    for (const v of w.pod.volumes ?? []) {
      if (v.persistentVolumeClaim && !find('PersistentVolumeClaim', w.namespace, v.persistentVolumeClaim.claimName))
        problems.push(`${where}: volume ${v.name} refers to missing PVC ${v.persistentVolumeClaim.claimName}`);
      if (v.configMap && !keyExists('ConfigMap', w.namespace, v.configMap.name))
        problems.push(`${where}: volume ${v.name} refers to missing ConfigMap ${v.configMap.name}`);
      if (v.secret && !keyExists('Secret', w.namespace, v.secret.secretName))
        problems.push(`${where}: volume ${v.name} refers to missing Secret ${v.secret.secretName}`);
      for (const item of v.secret?.items ?? []) {
        if (!keyExists('Secret', w.namespace, v.secret!.secretName, item.key))
          problems.push(`${where}: volume ${v.name} refers to missing Secret key ${v.secret!.secretName}/${item.key}`);
      }
    }
  }

  // PodDisruptionBudgets and NetworkPolicies select pods; peers given by podSelector alone exist.
  for (const pdb of objects.filter((o) => o.kind === 'PodDisruptionBudget')) {
    if (podsSelectedBy(pdb, (pdb.spec as { selector?: Selector }).selector).length === 0)
      problems.push(`PodDisruptionBudget/${pdb.metadata.name}: selector selects no pod template`);
  }
  for (const np of objects.filter((o) => o.kind === 'NetworkPolicy')) {
    const spec = np.spec as { podSelector: Selector; ingress?: { from?: Peer[] }[]; egress?: { to?: Peer[] }[] };
    if (podsSelectedBy(np, spec.podSelector).length === 0)
      problems.push(`NetworkPolicy/${np.metadata.name}: podSelector selects no pod template`);
    const peers = [...(spec.ingress ?? []).flatMap((r) => r.from ?? []), ...(spec.egress ?? []).flatMap((r) => r.to ?? [])];
    for (const peer of peers) {
      if (peer.podSelector && !peer.namespaceSelector && podsSelectedBy(np, peer.podSelector).length === 0)
        problems.push(`NetworkPolicy/${np.metadata.name}: peer podSelector ${JSON.stringify(peer.podSelector)} selects no pod template`);
    }
  }

  // Autoscalers target existing workloads, one autoscaler per workload; KEDA auth exists.
  const scaled = new Map<string, string>();
  for (const a of objects.filter((o) => o.kind === 'HorizontalPodAutoscaler' || o.kind === 'ScaledObject')) {
    const ref = (a.spec as { scaleTargetRef: { kind?: string; name: string } }).scaleTargetRef;
    const kind = ref.kind ?? 'Deployment';
    const key = `${kind}/${ns(a)}/${ref.name}`;
    if (!find(kind, ns(a), ref.name)) problems.push(`${a.kind}/${a.metadata.name}: scaleTargetRef ${kind}/${ref.name} does not exist`);
    if (scaled.has(key)) problems.push(`${a.kind}/${a.metadata.name}: ${kind}/${ref.name} is already scaled by ${scaled.get(key)}`);
    scaled.set(key, `${a.kind}/${a.metadata.name}`);
    for (const t of (a.spec as { triggers?: { authenticationRef?: { name: string; kind?: string } }[] }).triggers ?? []) {
      const auth = t.authenticationRef;
      if (auth && !find(auth.kind ?? 'TriggerAuthentication', ns(a), auth.name))
        problems.push(`${a.kind}/${a.metadata.name}: authenticationRef ${auth.name} does not exist`);
    }
  }
  for (const ta of objects.filter((o) => o.kind === 'TriggerAuthentication')) {
    for (const ref of (ta.spec as { secretTargetRef?: { name: string; key: string }[] }).secretTargetRef ?? []) {
      if (!keyExists('Secret', ns(ta), ref.name, ref.key))
        problems.push(`TriggerAuthentication/${ta.metadata.name}: secret key ${ref.name}/${ref.key} does not exist`);
    }
  }
  return problems;
}

interface Peer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
}

/**
 * Capabilities the `baseline` Pod Security Standard lets a container add (the namespaces
 * enforce `baseline` because of the tool-runner; every other container must meet `restricted`).
 */
export const BASELINE_CAPABILITIES = [
  'AUDIT_WRITE',
  'CHOWN',
  'DAC_OVERRIDE',
  'FOWNER',
  'FSETID',
  'KILL',
  'MKNOD',
  'NET_BIND_SERVICE',
  'SETFCAP',
  'SETGID',
  'SETPCAP',
  'SETUID',
  'SYS_CHROOT',
];

/** A reviewed departure from the `restricted` rules for one container (`<workload>/<container>`). */
export interface SecurityException {
  /** May run as uid 0 (runAsNonRoot false). */
  readonly runAsRoot?: boolean;
  /** May add exactly these capabilities (after dropping ALL); each must be in the baseline set or in `beyondBaseline`. */
  readonly addCapabilities?: readonly string[];
  /** Of those, the ones reviewed although outside `baseline` (the namespace must then enforce `privileged`). */
  readonly beyondBaseline?: readonly string[];
}

/**
 * Pod-security problems of the given workloads: each container must run as non-root, without
 * privilege escalation or privileges, with every capability dropped, a read-only root
 * filesystem, RuntimeDefault seccomp and CPU and memory requests and limits. `exceptions`
 * (keyed `<workload name>/<container name>`) allow root and a fixed set of added capabilities,
 * never more than the baseline standard admits but those listed as `beyondBaseline`; the rest
 * of the rules still hold.
 */
export function securityProblems(list: Workload[], exceptions: Record<string, SecurityException> = {}): string[] {
  const problems: string[] = [];
  for (const w of list) {
    for (const c of containersOf(w.pod)) {
      const where = `${w.object.kind}/${w.object.metadata.name} ${c.name}`;
      const allowed = exceptions[`${w.object.metadata.name}/${c.name}`] ?? {};
      const sc = c.securityContext ?? {};
      if (!allowed.runAsRoot) {
        if (!(sc.runAsNonRoot ?? w.pod.securityContext?.runAsNonRoot)) problems.push(`${where}: runAsNonRoot is not true`);
        if (w.pod.securityContext?.runAsUser === 0) problems.push(`${where}: runs as uid 0`);
      }
      if (sc.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation is not false`);
      if (sc.privileged) problems.push(`${where}: privileged`);
      const added = [...(sc.capabilities?.add ?? [])].sort();
      const mayAdd = [...(allowed.addCapabilities ?? [])].sort();
      if (!sc.capabilities?.drop?.includes('ALL') || added.join() !== mayAdd.join()) {
        problems.push(
          mayAdd.length
            ? `${where}: capabilities are not ALL dropped plus exactly ${mayAdd.join(', ')}`
            : `${where}: capabilities are not all dropped`,
        );
      }
      // (An excepted container may not go past baseline either, unless that capability is
      // itself reviewed: the namespaces would refuse it, or must enforce `privileged`.)
      if (mayAdd.length)
        for (const cap of added)
          if (!BASELINE_CAPABILITIES.includes(cap) && !(allowed.beyondBaseline ?? []).includes(cap))
            problems.push(`${where}: capability ${cap} is outside the baseline Pod Security Standard`);
      if (sc.readOnlyRootFilesystem !== true) problems.push(`${where}: root filesystem is writable`);
      if ((sc.seccompProfile ?? w.pod.securityContext?.seccompProfile)?.type !== 'RuntimeDefault')
        problems.push(`${where}: seccomp profile is not RuntimeDefault`);
      for (const r of ['cpu', 'memory']) {
        if (!c.resources?.requests?.[r]) problems.push(`${where}: no ${r} request`);
        if (!c.resources?.limits?.[r]) problems.push(`${where}: no ${r} limit`);
      }
    }
  }
  return problems;
}

/** One end of a connection: a pod (namespace and labels) or an address outside the cluster. */
export interface Endpoint {
  readonly pod?: { readonly namespace: string; readonly labels: Record<string, string> };
  /** Addresses it may have. Default for a pod: POD_ADDRESSES (pod IPs are not known in advance). */
  readonly ips?: readonly string[];
}

/** Addresses a pod may have: the private and shared ranges clusters take pod CIDRs from. */
export const POD_ADDRESSES = ['10.244.0.17', '10.0.3.9', '172.17.0.5', '192.168.10.4', '100.64.1.3', 'fd00:10:244::11'];

interface PolicyPort {
  protocol?: string;
  port?: number | string;
  endPort?: number;
}
interface PolicyPeer {
  podSelector?: Selector;
  namespaceSelector?: Selector;
  ipBlock?: { cidr: string; except?: string[] };
}
interface PolicySpec {
  podSelector: Selector;
  policyTypes?: string[];
  ingress?: { from?: PolicyPeer[]; ports?: PolicyPort[] }[];
  egress?: { to?: PolicyPeer[]; ports?: PolicyPort[] }[];
}

function inCidr(ip: string, cidr: string): boolean {
  const [address, bits] = cidr.split('/') as [string, string];
  const family = isIP(address);
  if (family === 0 || family !== isIP(ip)) return false;
  const list = new BlockList();
  list.addSubnet(address, Number(bits), family === 4 ? 'ipv4' : 'ipv6');
  return list.check(ip, family === 4 ? 'ipv4' : 'ipv6');
}

/**
 * Whether the NetworkPolicies among `objects` let `from` open a connection to `to` on `port`:
 * the egress policies selecting `from` (if it is a pod) and the ingress policies selecting `to`
 * (if it is a pod) must both allow it; a pod no policy of a direction selects is open in that
 * direction. A pod's possible addresses are matched against ipBlocks (any one suffices), so a
 * rule that could let a pod through counts as letting it through. Named ports are refused.
 */
export function connectionAllowed(objects: K8sObject[], from: Endpoint, to: Endpoint, port: number, protocol = 'TCP'): boolean {
  const policies = objects.filter((o) => o.kind === 'NetworkPolicy');
  const namespaceLabels = (ns: string): Record<string, string> => {
    const o = objects.find((x) => x.kind === 'Namespace' && x.metadata.name === ns);
    return { ...o?.metadata.labels, 'kubernetes.io/metadata.name': ns };
  };
  const ipsOf = (e: Endpoint) => e.ips ?? (e.pod ? POD_ADDRESSES : []);
  const peerMatches = (policyNamespace: string, peer: PolicyPeer, e: Endpoint): boolean => {
    if (peer.ipBlock) {
      const { cidr, except = [] } = peer.ipBlock;
      return ipsOf(e).some((ip) => inCidr(ip, cidr) && !except.some((x) => inCidr(ip, x)));
    }
    if (!e.pod) return false;
    const nsOk = peer.namespaceSelector
      ? selects(peer.namespaceSelector, namespaceLabels(e.pod.namespace))
      : e.pod.namespace === policyNamespace;
    return nsOk && (peer.podSelector ? selects(peer.podSelector, e.pod.labels) : true);
  };
  const portMatches = (ports: PolicyPort[] | undefined): boolean =>
    !ports?.length ||
    ports.some((p) => {
      if (typeof p.port === 'string') throw new Error(`named port ${p.port}: not supported by this check`);
      if ((p.protocol ?? 'TCP') !== protocol) return false;
      if (p.port === undefined) return true;
      return p.endPort === undefined ? p.port === port : port >= p.port && port <= p.endPort;
    });
  const side = (subject: Endpoint, other: Endpoint, direction: 'Ingress' | 'Egress'): boolean => {
    if (!subject.pod) return true;
    const { namespace, labels } = subject.pod;
    const applying = policies.filter((np) => {
      const spec = np.spec as PolicySpec;
      const types = spec.policyTypes ?? (spec.egress ? ['Ingress', 'Egress'] : ['Ingress']);
      return (np.metadata.namespace ?? '') === namespace && types.includes(direction) && selects(spec.podSelector ?? {}, labels);
    });
    if (applying.length === 0) return true;
    return applying.some((np) => {
      const spec = np.spec as PolicySpec;
      const rules =
        direction === 'Ingress'
          ? (spec.ingress ?? []).map((r) => ({ peers: r.from, ports: r.ports }))
          : (spec.egress ?? []).map((r) => ({ peers: r.to, ports: r.ports }));
      return rules.some(
        (r) => portMatches(r.ports) && (!r.peers?.length || r.peers.some((peer) => peerMatches(np.metadata.namespace ?? '', peer, other))),
      );
    });
  };
  return side(from, to, 'Egress') && side(to, from, 'Ingress');
}
