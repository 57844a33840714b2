/**
 * Production bundles of the services: `dist/<service>/main.js`, one ESM file per service built by esbuild
 * from `services/<service>/src/main.ts` with every dependency inlined except native ones ({@link NATIVE_EXTERNALS}),
 * beside a `package.json` of those at the lockfile's versions and the files the service loads at run time.
 * The Dockerfiles copy exactly this folder (docs/deploy.md, "Images").
 */
import { cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import * as esbuild from 'esbuild';

export const SERVICES = ['conversation', 'llm-gateway', 'tool-runner', 'web-bff'] as const;
export type Service = (typeof SERVICES)[number];

/** Repository root (this file is packages/deploy-check/src/bundle.ts). */
export const ROOT = new URL('../../../', import.meta.url).pathname;

/**
 * Packages left out of the bundle and installed in the image: native addons (`sharp`,
 * `pg-native`, which `pg` requires only when asked). PGlite is not among them: only the
 * embedded mode (apps/embedded) uses it, and no service image contains that.
 */
export const NATIVE_EXTERNALS = ['sharp', 'pg-native'];

export interface BundleResult {
  readonly service: Service;
  readonly dir: string;
  readonly mainFile: string;
  readonly bytes: number;
  /** External packages the bundle imports, with the lockfile version (what the image installs). */
  readonly externals: Record<string, string>;
}

function packageOf(specifier: string): string {
  const parts = specifier.split('/');
  return specifier.startsWith('@') ? `${parts[0]}/${parts[1]}` : parts[0]!;
}

async function lockedVersion(pkg: string): Promise<string> {
  const lock = JSON.parse(await readFile(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string }> };
  const version = lock.packages[`node_modules/${pkg}`]?.version;
  if (!version) throw new Error(`${pkg} is not in package-lock.json`);
  return version;
}

/** Builds `dist/<service>` (or `<outRoot>/<service>`) and returns what it holds. */
export async function bundleService(service: Service, outRoot = join(ROOT, 'dist')): Promise<BundleResult> {
  const dir = join(outRoot, service);
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const mainFile = join(dir, 'main.js');
  const result = await esbuild.build({
    entryPoints: [join(ROOT, 'services', service, 'src', 'main.ts')],
    outfile: mainFile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node20',
    sourcemap: 'linked',
    legalComments: 'none',
    logLevel: 'warning',
    metafile: true,
    external: NATIVE_EXTERNALS,
    // CommonJS dependencies (pg, ioredis, ...) call require() for Node built-ins.
    banner: {
      js: "import { createRequire as __bedrockCreateRequire } from 'node:module'; const require = __bedrockCreateRequire(import.meta.url);",
    },
  });
  const externals: Record<string, string> = {};
  for (const output of Object.values(result.metafile.outputs)) {
    for (const imp of output.imports) {
      if (!imp.external || imp.path.startsWith('node:')) continue;
      const pkg = packageOf(imp.path);
      if (NATIVE_EXTERNALS.includes(pkg) && existsSync(join(ROOT, 'node_modules', pkg))) externals[pkg] = await lockedVersion(pkg);
    }
  }
  await writeFile(
    join(dir, 'package.json'),
    `${JSON.stringify({ name: `@bedrock/${service}-bundle`, private: true, type: 'module', main: 'main.js', dependencies: externals }, null, 2)}\n`,
  );
  if (service === 'conversation')
    await cp(join(ROOT, 'services/conversation/src/db/migrations'), join(dir, 'migrations'), { recursive: true });
  if (service === 'web-bff') {
    const ui = join(ROOT, 'services/web-bff/ui/dist');
    if (existsSync(ui)) await cp(ui, join(dir, 'ui'), { recursive: true });
  }
  const bytes = result.metafile.outputs[Object.keys(result.metafile.outputs).find((k) => k.endsWith('main.js'))!]!.bytes;
  return { service, dir, mainFile, bytes, externals };
}
