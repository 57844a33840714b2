/** Shared by the deploy-check tests: the rendered overlays and small helpers. */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../src/bundle.ts';
import { renderKustomization, type K8sObject } from '../src/kustomize.ts';
import type { ExternalSecrets, SecurityException } from '../src/cross-refs.ts';

export const K8S = join(ROOT, 'deploy', 'k8s');
export const OVERLAYS = ['dev', 'prod', 'prod-ha'] as const;
export type Overlay = (typeof OVERLAYS)[number];

export function render(overlay: Overlay | 'base'): K8sObject[] {
  return renderKustomization(overlay === 'base' ? join(K8S, 'base') : join(K8S, 'overlays', overlay));
}

export function externalSecrets(overlay: Overlay): ExternalSecrets {
  const file = join(K8S, 'overlays', overlay, 'external-secrets.json');
  if (!existsSync(file)) return {};
  const parsed = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(parsed).filter(([k]) => !k.startsWith('$'))) as ExternalSecrets;
}

export function byKind(objects: K8sObject[], kind: string, name: string): K8sObject {
  const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
  if (!o) throw new Error(`no ${kind}/${name}`);
  return o;
}

/** Parses a Kubernetes duration setting such as `20s` (the subset the manifests use), ms. */
export function durationMs(value: string): number {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(value);
  if (!m) throw new Error(`bad duration ${value}`);
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[(m[2] ?? 'ms') as 'ms'];
  return Number(m[1]) * unit;
}

/**
 * The tool-runner's reviewed departures from the `restricted` rules (docs/deploy.md, "The
 * tool-runner's capabilities"): the runner starts as uid 0 with what switching tools to their
 * owners' uids needs, plus SYS_ADMIN (outside `baseline`) for the tools' views, per-run tmpfs
 * scratch and btrfs quotas; its init container only makes the workspace root root's, 0711.
 */
export const TOOL_RUNNER_CAPABILITIES = ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'KILL', 'SETGID', 'SETPCAP', 'SETUID', 'SYS_ADMIN'];
export const SECURITY_EXCEPTIONS: Record<string, SecurityException> = {
  'tool-runner/tool-runner': { runAsRoot: true, addCapabilities: TOOL_RUNNER_CAPABILITIES, beyondBaseline: ['SYS_ADMIN'] },
  'tool-runner/workspace-root': { runAsRoot: true, addCapabilities: ['CHOWN'] },
};
