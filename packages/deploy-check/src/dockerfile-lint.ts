/**
 * Static checks of the service Dockerfiles (parsed with dockerfile-ast), for machines without a
 * Docker engine: multi-stage, pinned base images, no ADD, no HEALTHCHECK (Kubernetes probes
 * instead), a non-root USER in the final stage, exec-form CMD/ENTRYPOINT, COPY --from only of
 * earlier stages, and the final stage exposing exactly the ports the Deployment declares.
 */
import { DockerfileParser } from 'dockerfile-ast';

export interface DockerfileExpectations {
  /** Ports the final image must EXPOSE (the Deployment's container ports). */
  readonly ports: number[];
  /** The uid the pod runs as (the final USER must be it). */
  readonly uid: number;
}

export interface DockerfileFacts {
  readonly stages: string[];
  /** RUN commands of each stage, by stage name. */
  readonly runs: Record<string, string[]>;
  /** ENV assignments of the final stage. */
  readonly env: Record<string, string>;
  /** `COPY` sources of the final stage (with their `--from` stage). */
  readonly copies: { from: string | undefined; args: string }[];
}

/** Problems found (empty: the Dockerfile passes) and what was read from it. */
export function lintDockerfile(text: string, expect: DockerfileExpectations): { problems: string[]; facts: DockerfileFacts } {
  const problems: string[] = [];
  const d = DockerfileParser.parse(text);
  const froms = d.getFROMs();
  const stages: string[] = [];
  const runs: Record<string, string[]> = {};
  const env: Record<string, string> = {};
  let copies: { from: string | undefined; args: string }[] = [];
  if (froms.length < 2) problems.push('not multi-stage (one FROM)');
  let stage = '';
  let user: string | undefined;
  let exposed: number[] = [];
  for (const i of d.getInstructions()) {
    const keyword = i.getKeyword();
    const args = i.getArgumentsContent() ?? '';
    switch (keyword) {
      case 'FROM': {
        const from = froms.find((f) => f.getRange().start.line === i.getRange().start.line)!;
        const tag = from.getImageTag();
        if (!tag && !from.getImageDigest()) problems.push(`FROM ${from.getImage()}: no tag or digest`);
        if (tag === 'latest') problems.push(`FROM ${from.getImage()}: the latest tag is not reproducible`);
        stage = from.getBuildStage() ?? `#${stages.length}`;
        stages.push(stage);
        runs[stage] = [];
        user = undefined;
        exposed = [];
        copies = [];
        for (const k of Object.keys(env)) delete env[k];
        break;
      }
      case 'ADD':
        problems.push(`ADD ${args}: use COPY (and never fetch URLs at build time)`);
        break;
      case 'HEALTHCHECK':
        problems.push('HEALTHCHECK: Kubernetes probes the services; leave it out');
        break;
      case 'RUN':
        runs[stage]!.push(args.replace(/\\\s*\n/g, ' ').replace(/\s+/g, ' '));
        break;
      case 'USER':
        user = args.trim();
        break;
      case 'EXPOSE':
        exposed = [
          ...exposed,
          ...args
            .split(/\s+/)
            .filter(Boolean)
            .map((p) => Number(p.split('/')[0])),
        ];
        break;
      case 'ENV':
        for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("[^"]*"|\S*)/g)) env[m[1]!] = m[2]!.replace(/^"|"$/g, '');
        break;
      case 'COPY': {
        const fromFlag = (i as unknown as { getFromFlag(): { getValue(): string } | null }).getFromFlag()?.getValue();
        if (fromFlag !== undefined && !stages.slice(0, -1).includes(fromFlag))
          problems.push(`COPY --from=${fromFlag}: not an earlier stage`);
        copies.push({ from: fromFlag, args: args.replace(/--from=\S+\s*/, '') });
        break;
      }
      case 'CMD':
      case 'ENTRYPOINT': {
        const json = (i as unknown as { getJSONStrings(): unknown[] }).getJSONStrings();
        if (json.length === 0) problems.push(`${keyword} ${args}: use the exec (JSON) form so signals reach the process`);
        break;
      }
    }
  }
  if (!user) problems.push('final stage has no USER (would run as root)');
  else {
    const name = user.split(':')[0]!;
    if (name === 'root' || name === '0') problems.push(`USER ${user}: root`);
    else if (name !== String(expect.uid)) problems.push(`USER ${user}: expected uid ${expect.uid} (the pod's runAsUser)`);
  }
  const want = [...expect.ports].sort((a, b) => a - b).join(' ');
  const got = [...exposed].sort((a, b) => a - b).join(' ');
  if (want !== got) problems.push(`EXPOSE ${got}: expected ${want} (the Deployment's container ports)`);
  return { problems, facts: { stages, runs, env: { ...env }, copies } };
}
