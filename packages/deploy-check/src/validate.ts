/**
 * Validates rendered objects against the Kubernetes OpenAPI schemas bundled in
 * `kubernetes-models` 4.5.1 (Kubernetes v1.33 API), KEDA's CRD schemas bundled in
 * `@kubernetes-models/keda` 0.4.2 (KEDA v2.10 CRDs) — the newest releases whose engines accept
 * Node 20 (docs/deploy.md) — and the CRD schemas vendored in `schemas/` (CloudNativePG 1.30
 * `Cluster`; schemas/README.md says where from). A kind without a schema here is an error.
 */
import { readFileSync } from 'node:fs';
import { Ajv, type ValidateFunction } from 'ajv';
import type { K8sObject } from './kustomize.ts';

/** The API version the schemas describe; docs/deploy.md states it too. */
export const KUBERNETES_VERSION = 'v1.33';
export const KEDA_VERSION = 'v2.10';
export const CLOUDNATIVE_PG_VERSION = '1.30.0';

/** Vendored CRD schemas by `<apiVersion> <kind>` (files in schemas/). */
const VENDORED: Record<string, string> = {
  'postgresql.cnpg.io/v1 Cluster': 'cloudnative-pg/postgresql.cnpg.io_v1_Cluster.json',
};

type Schema = Record<string, unknown>;

/**
 * A CRD's structural schema as JSON Schema for Ajv: objects that list their `properties` take no
 * others (the API server's strict field validation, `kubectl apply`'s default, refuses unknown
 * fields) unless they preserve unknown fields; int-or-string is either.
 */
function forAjv(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(forAjv);
  if (!schema || typeof schema !== 'object') return schema;
  const s = schema as Schema;
  const out: Schema = {};
  for (const [k, v] of Object.entries(s)) {
    if (k.startsWith('x-kubernetes-')) continue;
    out[k] = k === 'properties' ? Object.fromEntries(Object.entries(v as Schema).map(([name, sub]) => [name, forAjv(sub)])) : forAjv(v);
  }
  if (s['x-kubernetes-int-or-string'] === true) {
    delete out.type;
    out.anyOf = [{ type: 'integer' }, { type: 'string' }];
  }
  if (s.type === 'object' && s.properties && s.additionalProperties === undefined && s['x-kubernetes-preserve-unknown-fields'] !== true) {
    out.additionalProperties = false;
  }
  return out;
}

const vendored = new Map<string, ValidateFunction>();
function vendoredValidator(key: string): ValidateFunction | undefined {
  const file = VENDORED[key];
  if (!file) return undefined;
  let validate = vendored.get(key);
  if (!validate) {
    const schema = JSON.parse(readFileSync(new URL(`../schemas/${file}`, import.meta.url), 'utf8')) as unknown;
    // Kubernetes' formats (int32, date-time, ...) are not checked, as kubernetes-models does not either.
    const ajv = new Ajv({ allErrors: true, strict: false, validateFormats: false });
    validate = ajv.compile(forAjv(schema) as Schema);
    vendored.set(key, validate);
  }
  return validate;
}

interface Model {
  validate(): void;
}
type ModelClass = new (data: unknown) => Model;

/** Module path of the model for an apiVersion and kind. */
export function modelModule(apiVersion: string, kind: string): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['', apiVersion];
  if (group === 'keda.sh') return `@kubernetes-models/keda/keda.sh/${version}/${kind}`;
  return group ? `kubernetes-models/${group}/${version}/${kind}` : `kubernetes-models/${version}/${kind}`;
}

export interface SchemaError {
  readonly object: string;
  readonly message: string;
}

/** Every object's schema errors (empty when all are valid). */
export async function validateObjects(objects: K8sObject[]): Promise<SchemaError[]> {
  const errors: SchemaError[] = [];
  for (const o of objects) {
    const id = `${o.kind}/${o.metadata.name}`;
    const crd = vendoredValidator(`${o.apiVersion} ${o.kind}`);
    if (crd) {
      if (!crd(o)) {
        const message = (crd.errors ?? [])
          .map(
            (e) =>
              `${e.instancePath || '/'} ${e.message ?? 'is invalid'}${e.keyword === 'additionalProperties' ? ` (${String(e.params.additionalProperty)})` : ''}`,
          )
          .join('; ');
        errors.push({ object: id, message });
      }
      continue;
    }
    let Class: ModelClass;
    try {
      const mod = (await import(modelModule(o.apiVersion, o.kind))) as Record<string, ModelClass>;
      const found = mod[o.kind];
      if (!found) throw new Error('no such model');
      Class = found;
    } catch {
      errors.push({ object: id, message: `no schema for ${o.apiVersion} ${o.kind}` });
      continue;
    }
    try {
      new Class(structuredClone(o)).validate();
    } catch (err) {
      errors.push({ object: id, message: (err as Error).message });
    }
  }
  return errors;
}
