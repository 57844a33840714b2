// Bundles the `bedrock` CLI (src/cli/main.ts) into dist/cli/bedrock.mjs with esbuild, so that
// bin/bedrock.js starts it without tsx (docs/cli.md, "How it runs"). Part of `npm run build`
// (which `npm ci` runs); `node services/web-bff/bin/build-cli.mjs` rebuilds it alone.
//
// Writes, each by rename so a CLI starting meanwhile reads a whole file:
//   dist/cli/bedrock.mjs      the bundle (ESM, node20; no externals: the CLI has no native deps)
//   dist/cli/bedrock.mjs.map  its source map (used only under NODE_OPTIONS=--enable-source-maps)
//   dist/cli/inputs.json      the repository's source files in it, which bin/bedrock.js
//                             compares with the bundle's mtime to tell whether it is fresh
import { mkdir, rename, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(pkg, 'dist', 'cli');
const bundle = join(out, 'bedrock.mjs');

/**
 * The CLI imports two functions (generateToken, hashToken) through the `@bedrock/platform/server`
 * barrel, which re-exports the servers' plumbing (pino, prom-client, OpenTelemetry). Marking
 * that package's server modules side-effect-free lets esbuild drop the ones the CLI does not
 * use (about half the bundle); a module the CLI uses is kept whole, with its top-level code.
 */
const dropUnusedServerModules = {
  name: 'drop-unused-server-modules',
  setup(build) {
    build.onResolve({ filter: /^@bedrock\/platform\/server$|^\.\.?\// }, async (args) => {
      if (args.pluginData === 'resolved' || args.kind === 'entry-point') return undefined;
      const r = await build.resolve(args.path, { kind: args.kind, importer: args.importer, resolveDir: args.resolveDir, pluginData: 'resolved' });
      if (r.errors.length > 0 || !/[/\\]packages[/\\]platform[/\\]src[/\\]server[/\\]/.test(r.path)) return undefined;
      return { path: r.path, sideEffects: false };
    });
  },
};

const result = await esbuild.build({
  entryPoints: [join(pkg, 'src', 'cli', 'main.ts')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  // Smaller to parse; names kept so that error and class names read as in the sources.
  minify: true,
  keepNames: true,
  sourcemap: 'linked',
  legalComments: 'none',
  // Bundled CommonJS that calls require() (none today) gets Node's.
  banner: { js: "import { createRequire as __bedrockCreateRequire } from 'node:module'; const require = __bedrockCreateRequire(import.meta.url);" },
  plugins: [dropUnusedServerModules],
  metafile: true,
  write: false,
  logLevel: 'warning',
});

await mkdir(out, { recursive: true });
const root = resolve(pkg, '..', '..');
const inputs = Object.keys(result.metafile.inputs)
  .map((p) => resolve(process.cwd(), p))
  .filter((p) => !p.split(/[/\\]/).includes('node_modules'))
  .map((p) => relative(out, p))
  .sort();
inputs.push(relative(out, fileURLToPath(import.meta.url)));
const tmp = `.tmp-${process.pid}`;
const files = [...result.outputFiles.map((f) => ({ path: f.path, contents: f.contents })), { path: join(out, 'inputs.json'), contents: `${JSON.stringify(inputs, null, 1)}\n` }];
// The bundle last: its mtime, newer than every input's, is what marks the set fresh.
files.sort((a, b) => Number(a.path === bundle) - Number(b.path === bundle));
for (const f of files) {
  await writeFile(f.path + tmp, f.contents);
  await rename(f.path + tmp, f.path);
}
const bytes = result.outputFiles.find((f) => f.path === bundle)?.contents.length ?? 0;
console.log(`bedrock CLI built: ${relative(root, bundle)} (${(bytes / 1024).toFixed(0)} KiB, ${inputs.length} source files)`);
