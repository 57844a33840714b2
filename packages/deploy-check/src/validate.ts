/**
 * Validates rendered objects against the Kubernetes OpenAPI schemas bundled in
 * `kubernetes-models` 4.5.1 (Kubernetes v1.33 API) and KEDA's CRD schemas bundled in
 * `@kubernetes-models/keda` 0.4.2 (KEDA v2.10 CRDs): the newest releases whose engines accept
 * Node 20 (later ones declare Node 22; docs/deploy.md). A kind without a schema here is an error.
 */
import type { K8sObject } from './kustomize.ts';

/** The API version the schemas describe; docs/deploy.md states it too. */
export const KUBERNETES_VERSION = 'v1.33';
export const KEDA_VERSION = 'v2.10';

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
