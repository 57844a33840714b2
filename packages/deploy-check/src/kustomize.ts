/**
 * Renders a kustomization with the real kustomize: `kubectl kustomize <dir>` (kubectl embeds
 * kustomize v5; `KUBECTL` names another binary). `make setup` installs kubectl where it is
 * missing (scripts/ensure-kubectl.sh), so the checks render exactly what `kubectl apply -k`
 * applies.
 */
import { spawnSync } from 'node:child_process';
import { parseAllDocuments } from 'yaml';

/** A Kubernetes object as plain JSON. */
export type K8sObject = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [key: string]: unknown;
};

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

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

function asObject(value: Json, source: string): K8sObject {
  const o = value as K8sObject;
  if (
    !o ||
    typeof o !== 'object' ||
    typeof o.apiVersion !== 'string' ||
    typeof o.kind !== 'string' ||
    typeof o.metadata?.name !== 'string'
  ) {
    throw new Error(`${source}: not a Kubernetes object (apiVersion, kind and metadata.name are required)`);
  }
  return o;
}

const KUBECTL = process.env.KUBECTL || 'kubectl';
const rendered = new Map<string, string>();

/** `kubectl kustomize <dir>` as YAML text (one run per directory and process). */
export function kustomizeYaml(dir: string): string {
  let text = rendered.get(dir);
  if (text === undefined) {
    const out = spawnSync(KUBECTL, ['kustomize', dir], { encoding: 'utf8', maxBuffer: 64 << 20 });
    if (out.error) {
      throw new Error(
        `cannot run ${KUBECTL} (${out.error.message}): install kubectl (bash scripts/ensure-kubectl.sh, or see docs/deploy.md) or set KUBECTL to its path`,
      );
    }
    if (out.status !== 0) throw new Error(`${KUBECTL} kustomize ${dir} failed: ${out.stderr.trim() || `exit ${out.status}`}`);
    text = out.stdout;
    rendered.set(dir, text);
  }
  return text;
}

/**
 * Renders the kustomization in `dir`: fresh objects on every call (callers may change them).
 * Secret data comes as kustomize writes it, base64 wrapped at 70 columns; the line breaks are
 * taken out (the API server ignores them when it decodes), so the values are plain base64.
 */
export function renderKustomization(dir: string): K8sObject[] {
  const source = `${KUBECTL} kustomize ${dir}`;
  const objects = parseYamlDocuments(kustomizeYaml(dir), source).map((d) => asObject(d, source));
  for (const o of objects) {
    const data = o.kind === 'Secret' ? (o.data as Record<string, string> | undefined) : undefined;
    for (const key of Object.keys(data ?? {})) data![key] = data![key]!.replace(/\s+/g, '');
  }
  return objects;
}

/** `Kind/namespace/name` (namespace empty for cluster-scoped objects). */
export function objectId(o: K8sObject): string {
  return `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`;
}
