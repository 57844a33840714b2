/**
 * The service Dockerfiles, checked without a Docker engine: lint rules, agreement with the
 * rendered Deployments (ports, uid) and with the bundles (the build stage runs
 * scripts/bundle.ts for its service; the runtime copies dist/<service>).
 */
import { describe, expect, it } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT, SERVICES } from '../src/bundle.ts';
import { lintDockerfile } from '../src/dockerfile-lint.ts';
import { workloads } from '../src/cross-refs.ts';
import { render } from './support.ts';

const base = workloads(render('base'));
/**
 * The image's USER is the pod's uid, except for the tool-runner: its pod runs as uid 0 (with a
 * few capabilities, to switch tools to their own uid) while the image stays non-root (65532)
 * for anyone running it without those settings.
 */
const IMAGE_UID_OF_ROOT_PODS: Record<string, number> = { 'tool-runner': 65532 };
const expectationsFor = (service: string) => {
  const w = base.find((x) => x.object.metadata.name === service)!;
  const podUid = w.pod.securityContext!.runAsUser!;
  return {
    ports: (w.pod.containers[0]!.ports ?? []).map((p) => p.containerPort),
    uid: podUid === 0 ? IMAGE_UID_OF_ROOT_PODS[service]! : podUid,
  };
};
const dockerfile = (service: string) => readFileSync(join(ROOT, 'services', service, 'Dockerfile'), 'utf8');

describe('Dockerfiles', () => {
  it.each(SERVICES)(
    '%s: multi-stage, pinned, non-root, exec form, exposes the Deployment ports, builds and copies its bundle',
    (service) => {
      const { problems, facts } = lintDockerfile(dockerfile(service), expectationsFor(service));
      expect(problems).toEqual([]);
      expect(facts.stages[0]).toBe('build');
      expect(facts.runs.build!.join(' ')).toContain(`npx tsx scripts/bundle.ts ${service}`);
      expect(facts.runs.build!.join(' ')).toContain('npm ci');
      expect(facts.copies.some((c) => c.from === 'build' && c.args.startsWith(`/src/dist/${service} `))).toBe(true);
      expect(facts.env.NODE_ENV).toBe('production');
    },
  );

  it('the tool-runner image builds the sandbox helper and carries bash, git and ripgrep', () => {
    const { facts } = lintDockerfile(dockerfile('tool-runner'), expectationsFor('tool-runner'));
    expect(facts.runs.build!.join(' ')).toContain('npm run build -w services/tool-runner');
    expect(facts.runs.build!.join(' ')).toContain('cp services/tool-runner/bin/bedrock-sandbox dist/tool-runner/bedrock-sandbox');
    const installed = facts.runs.runtime!.join(' ');
    for (const tool of ['bash', 'git', 'ripgrep', 'tini']) expect(installed).toMatch(new RegExp(`apt-get install [^&]*\\b${tool}\\b`));
    expect(facts.env.BEDROCK_SANDBOX_HELPER).toBe('/app/bedrock-sandbox');
  });

  it('web-bff serves the UI the bundle carries; the gateway installs its native sharp', () => {
    expect(lintDockerfile(dockerfile('web-bff'), expectationsFor('web-bff')).facts.env.BEDROCK_UI_DIR).toBe('/app/ui');
    const gateway = lintDockerfile(dockerfile('llm-gateway'), expectationsFor('llm-gateway')).facts;
    expect(gateway.runs.deps!.join(' ')).toContain('npm install --omit=dev');
  });

  it('reports what breaks the rules', () => {
    const bad = [
      'FROM node:latest',
      'ADD https://example.com/x.tgz /x.tgz',
      'COPY --from=nowhere /a /b',
      'HEALTHCHECK CMD curl -f http://localhost/',
      'USER root',
      'EXPOSE 8080',
      'CMD node main.js',
    ].join('\n');
    expect(lintDockerfile(bad, { ports: [8080, 9464], uid: 65532 }).problems).toEqual([
      'not multi-stage (one FROM)',
      'FROM node:latest: the latest tag is not reproducible',
      'ADD https://example.com/x.tgz /x.tgz: use COPY (and never fetch URLs at build time)',
      'COPY --from=nowhere: not an earlier stage',
      'HEALTHCHECK: Kubernetes probes the services; leave it out',
      'CMD node main.js: use the exec (JSON) form so signals reach the process',
      'USER root: root',
      "EXPOSE 8080: expected 8080 9464 (the Deployment's container ports)",
    ]);
  });

  it('the build context leaves out dependencies, build output and git', () => {
    const ignored = readFileSync(join(ROOT, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['.git', '**/node_modules', 'dist', 'packages/contracts/src/gen', 'services/tool-runner/bin'])
      expect(ignored).toContain(entry);
  });
});
