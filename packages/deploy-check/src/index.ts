export { renderKustomization, kustomizeYaml, parseYamlDocuments, objectId, type K8sObject } from './kustomize.ts';
export { validateObjects, modelModule, KUBERNETES_VERSION, KEDA_VERSION, type SchemaError } from './validate.ts';
export { crossReferenceProblems, securityProblems, workloads, selects, type ExternalSecrets, type Workload } from './cross-refs.ts';
export { bundleService, SERVICES, NATIVE_EXTERNALS, type Service, type BundleResult } from './bundle.ts';
