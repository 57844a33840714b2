/**
 * Validates rendered objects against the Kubernetes OpenAPI schemas bundled in
 * `kubernetes-models` 5.1.0 (Kubernetes v1.36 API) and KEDA's CRD schemas bundled in
 * `@kubernetes-models/keda` 2.0.0 (KEDA v2.19 CRDs). A kind without a schema here is an error.
 */
import type { K8sObject } from './kustomize.ts';

/** The API version the schemas describe; docs/deploy.md states it too. */
export const KUBERNETES_VERSION = 'v1.36';
export const KEDA_VERSION = 'v2.19';

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
