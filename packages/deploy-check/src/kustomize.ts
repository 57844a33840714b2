/**
 * A small kustomize: renders a kustomization directory into Kubernetes objects using only the
 * subset deploy/k8s uses, so the manifests can be checked on machines without kustomize or
 * kubectl. Supported fields: `resources` (files and directories), `namespace`, `labels`
 * (metadata labels only: `includeSelectors`/`includeTemplates` false), `replicas`, `images`
 * (`newName`, `newTag`, `digest`), `patches` (RFC 6902 files with a `target` of kind and
 * name), `configMapGenerator`/`secretGenerator` (`literals`, and `files` inside the
 * kustomization's directory) and `generatorOptions`
 * (`disableNameSuffixHash: true` is required: no hash suffixes). Anything else throws, so
 * a manifest can never use a feature this renderer would silently ignore. When `kubectl`
 * exists, the tests check the output equals `kubectl kustomize`.
 */
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';

/** A Kubernetes object as plain JSON. */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
};

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const SUPPORTED = new Set([
  'apiVersion',
  'kind',
  'resources',
  'namespace',
  'labels',
  'replicas',
  'images',
  'patches',
  'configMapGenerator',
  'secretGenerator',
  'generatorOptions',
]);

/** Kinds that have no namespace (only those deploy/k8s could use). */
const CLUSTER_SCOPED = new Set(['Namespace', 'PersistentVolume', 'StorageClass', 'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'PriorityClass']);

interface Kustomization {
  resources?: string[];
  namespace?: string;
  labels?: { pairs: Record<string, string>; includeSelectors?: boolean; includeTemplates?: boolean }[];
  replicas?: { name: string; count: number }[];
  images?: { name: string; newName?: string; newTag?: string; digest?: string }[];
  patches?: { path?: string; patch?: string; target?: { kind?: string; name?: string } }[];
  configMapGenerator?: Generator[];
  secretGenerator?: Generator[];
  generatorOptions?: { disableNameSuffixHash?: boolean };
}

interface Generator {
  name: string;
  literals?: string[];
  /** `key=path` or `path` (the key is then the file name), relative to the kustomization. */
  files?: string[];
  type?: string;
}

/** Parses a multi-document YAML file; empty documents are skipped. */
export function parseYamlDocuments(text: string, source: string): Json[] {
  const out: Json[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length) throw new Error(`${source}: ${doc.errors[0]!.message}`);
    const value = doc.toJS() as Json;
    if (value !== null && value !== undefined) out.push(value);
  }
  return out;
}

function readKustomization(dir: string): Kustomization {
  const file = join(dir, 'kustomization.yaml');
  const [doc, ...rest] = parseYamlDocuments(readFileSync(file, 'utf8'), file);
  if (!doc || rest.length || typeof doc !== 'object' || Array.isArray(doc)) throw new Error(`${file}: expected one mapping`);
  for (const key of Object.keys(doc)) if (!SUPPORTED.has(key)) throw new Error(`${file}: field ${key} is not supported by this renderer`);
  if (doc.kind !== 'Kustomization') throw new Error(`${file}: kind must be Kustomization`);
  return doc as unknown as Kustomization;
}

function asObject(value: Json, source: string): K8sObject {
  const o = value as K8sObject;
  if (!o || typeof o !== 'object' || typeof o.apiVersion !== 'string' || typeof o.kind !== 'string' || typeof o.metadata?.name !== 'string') {
    throw new Error(`${source}: not a Kubernetes object (apiVersion, kind and metadata.name are required)`);
  }
  return o;
}

function literalsToData(literals: string[] | undefined, source: string): Record<string, string> {
  const data: Record<string, string> = {};
  for (const literal of literals ?? []) {
    const eq = literal.indexOf('=');
    if (eq <= 0) throw new Error(`${source}: literal ${JSON.stringify(literal)} is not KEY=VALUE`);
    const key = literal.slice(0, eq);
    if (key in data) throw new Error(`${source}: key ${key} given twice`);
    data[key] = literal.slice(eq + 1);
  }
  return data;
}

function filesToData(dir: string, files: string[] | undefined, source: string, data: Record<string, string>): void {
  for (const entry of files ?? []) {
    const eq = entry.indexOf('=');
    const path = eq >= 0 ? entry.slice(eq + 1) : entry;
    const key = eq >= 0 ? entry.slice(0, eq) : path.split('/').pop()!;
    // kustomize's default load restrictor: files inside the kustomization's directory only.
    if (!key || !path || path.startsWith('/') || path.split('/').includes('..')) throw new Error(`${source}: file ${JSON.stringify(entry)} must be a path inside the kustomization`);
    if (key in data) throw new Error(`${source}: key ${key} given twice`);
    data[key] = readFileSync(join(dir, path), 'utf8');
  }
}

/** JSON pointer segments (RFC 6901). */
function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new Error(`bad JSON pointer ${path}`);
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'));
}

/** Applies RFC 6902 operations (`add`, `replace`, `remove`, `test`) to `doc` in place. */
export function applyJsonPatch(doc: Json, ops: { op: string; path: string; value?: Json }[]): void {
  for (const { op, path, value } of ops) {
    const segments = pointer(path);
    const last = segments.pop();
    if (last === undefined) throw new Error(`patch ${op} of the whole document is not supported`);
    let parent: Json = doc;
    for (const s of segments) {
      const next: Json | undefined = Array.isArray(parent) ? parent[Number(s)] : parent && typeof parent === 'object' ? parent[s] : undefined;
      if (next === undefined || next === null || typeof next !== 'object') throw new Error(`patch ${op} ${path}: ${s} does not exist`);
      parent = next;
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last);
      if (!Number.isInteger(index) || index < 0 || index > parent.length) throw new Error(`patch ${op} ${path}: bad index`);
      if (op === 'add') parent.splice(index, 0, structuredClone(value!));
      else if (index >= parent.length) throw new Error(`patch ${op} ${path}: no element ${index}`);
      else if (op === 'replace') parent[index] = structuredClone(value!);
      else if (op === 'remove') parent.splice(index, 1);
      else if (op === 'test') {
        if (JSON.stringify(parent[index]) !== JSON.stringify(value)) throw new Error(`patch test ${path} failed`);
      } else throw new Error(`patch op ${op} is not supported`);
    } else if (parent && typeof parent === 'object') {
      if (op === 'add') parent[last] = structuredClone(value!);
      else if (!(last in parent)) throw new Error(`patch ${op} ${path}: ${last} does not exist`);
      else if (op === 'replace') parent[last] = structuredClone(value!);
      else if (op === 'remove') delete parent[last];
      else if (op === 'test') {
        if (JSON.stringify(parent[last]) !== JSON.stringify(value)) throw new Error(`patch test ${path} failed`);
      } else throw new Error(`patch op ${op} is not supported`);
    } else throw new Error(`patch ${op} ${path}: parent is not a container`);
  }
}

function podSpecs(o: K8sObject): { containers?: { image?: string }[]; initContainers?: { image?: string }[] }[] {
  const spec = o.spec as { template?: { spec?: object }; jobTemplate?: { spec?: { template?: { spec?: object } } } } | undefined;
  const found = [spec?.template?.spec, spec?.jobTemplate?.spec?.template?.spec, o.kind === 'Pod' ? (spec as object) : undefined];
  return found.filter((s): s is object => !!s) as { containers?: { image?: string }[] }[];
}

/** The image's name without tag or digest (`bedrock/x:1` → `bedrock/x`; a registry port is kept). */
export function imageName(image: string): string {
  const at = image.indexOf('@');
  const noDigest = at >= 0 ? image.slice(0, at) : image;
  const colon = noDigest.lastIndexOf(':');
  return colon > noDigest.lastIndexOf('/') ? noDigest.slice(0, colon) : noDigest;
}

/** Renders the kustomization in `dir` (recursively through its resources). */
export function renderKustomization(dir: string): K8sObject[] {
  const k = readKustomization(dir);
  const source = join(dir, 'kustomization.yaml');
  const objects: K8sObject[] = [];
  for (const resource of k.resources ?? []) {
    const path = join(dir, resource);
    if (statSync(path).isDirectory()) objects.push(...renderKustomization(path));
    else objects.push(...parseYamlDocuments(readFileSync(path, 'utf8'), path).map((d) => asObject(d, path)));
  }
  const generators = [...(k.configMapGenerator ?? []).map((g) => ['ConfigMap', g] as const), ...(k.secretGenerator ?? []).map((g) => ['Secret', g] as const)];
  if (generators.length && k.generatorOptions?.disableNameSuffixHash !== true) throw new Error(`${source}: generators need generatorOptions.disableNameSuffixHash: true here`);
  for (const [kind, g] of generators) {
    for (const key of Object.keys(g)) if (!['name', 'literals', 'files', 'type'].includes(key)) throw new Error(`${source}: generator field ${key} is not supported`);
    const data = literalsToData(g.literals, source);
    filesToData(dir, g.files, source, data);
    if (kind === 'ConfigMap') objects.push({ apiVersion: 'v1', kind, metadata: { name: g.name }, data });
    else {
      const encoded = Object.fromEntries(Object.entries(data).map(([key, v]) => [key, Buffer.from(v).toString('base64')]));
      objects.push({ apiVersion: 'v1', kind, metadata: { name: g.name }, type: g.type ?? 'Opaque', data: encoded });
    }
  }
  for (const p of k.patches ?? []) {
    if (!p.path || p.patch || !p.target?.kind || !p.target.name) throw new Error(`${source}: patches need path and a target with kind and name`);
    const ops = parseYamlDocuments(readFileSync(join(dir, p.path), 'utf8'), p.path)[0];
    if (!Array.isArray(ops)) throw new Error(`${join(dir, p.path)}: only RFC 6902 patches (a list of operations) are supported`);
    const targets = objects.filter((o) => o.kind === p.target!.kind && o.metadata.name === p.target!.name);
    if (targets.length === 0) throw new Error(`${source}: patch ${p.path} matches no object`);
    for (const t of targets) applyJsonPatch(t as unknown as Json, ops as { op: string; path: string; value?: Json }[]);
  }
  for (const r of k.replicas ?? []) {
    const targets = objects.filter((o) => ['Deployment', 'StatefulSet', 'ReplicaSet'].includes(o.kind) && o.metadata.name === r.name);
    if (targets.length === 0) throw new Error(`${source}: replicas for ${r.name} match no workload`);
    for (const t of targets) (t.spec as { replicas: number }).replicas = r.count;
  }
  for (const image of k.images ?? []) {
    for (const o of objects) {
      for (const spec of podSpecs(o)) {
        for (const c of [...(spec.containers ?? []), ...(spec.initContainers ?? [])]) {
          if (!c.image || imageName(c.image) !== image.name) continue;
          const tagOrDigest = image.digest ? `@${image.digest}` : image.newTag ? `:${image.newTag}` : c.image.slice(imageName(c.image).length);
          c.image = `${image.newName ?? image.name}${tagOrDigest}`;
        }
      }
    }
  }
  for (const l of k.labels ?? []) {
    if (l.includeSelectors || l.includeTemplates) throw new Error(`${source}: labels with includeSelectors/includeTemplates are not supported`);
    for (const o of objects) o.metadata.labels = { ...o.metadata.labels, ...l.pairs };
  }
  if (k.namespace) for (const o of objects) if (!CLUSTER_SCOPED.has(o.kind)) o.metadata.namespace = k.namespace;
  const seen = new Set<string>();
  for (const o of objects) {
    const id = objectId(o);
    if (seen.has(id)) throw new Error(`${source}: ${id} is defined twice`);
    seen.add(id);
  }
  return objects;
}

/** `Kind/namespace/name` (namespace empty for cluster-scoped objects). */
export function objectId(o: K8sObject): string {
  return `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
}
