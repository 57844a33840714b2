/**
 * Prints an overlay rendered by `kubectl kustomize` as YAML, validated first (schemas and
 * cross-references):
 *   npm run render -w packages/deploy-check -- dev      (or prod, base)
 * Exits 1, printing the problems, when the overlay is not valid.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './bundle.ts';
import { crossReferenceProblems, type ExternalSecrets } from './cross-refs.ts';
import { kustomizeYaml, renderKustomization } from './kustomize.ts';
import { validateObjects } from './validate.ts';

const name = process.argv[2] ?? 'dev';
const dir = name === 'base' ? join(ROOT, 'deploy/k8s/base') : join(ROOT, 'deploy/k8s/overlays', name);
if (!existsSync(join(dir, 'kustomization.yaml'))) {
  console.error(`no kustomization at ${dir}`);
  process.exit(2);
}
const objects = renderKustomization(dir);
const externalFile = join(dir, 'external-secrets.json');
const external = existsSync(externalFile)
  ? (Object.fromEntries(
      Object.entries(JSON.parse(readFileSync(externalFile, 'utf8')) as Record<string, unknown>).filter(([k]) => !k.startsWith('$')),
    ) as ExternalSecrets)
  : {};
const problems = [
  ...(await validateObjects(objects)).map((e) => `${e.object}: ${e.message}`),
  ...(name === 'base' ? [] : crossReferenceProblems(objects, external)),
];
if (problems.length) {
  console.error(problems.join('\n'));
  process.exit(1);
}
process.stdout.write(kustomizeYaml(dir));
