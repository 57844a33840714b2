// Bundles the `bedrock` CLI with esbuild into dist/, so that bin/bedrock.js starts it without
// tsx, and so that the package runs where it is installed (`npm install -g ./apps/cli`) with no
// dependency at all: everything but Node's built-ins is in the bundles (docs/cli.md, "How it
// runs"). The package's `build` script, part of the root `npm run build` (which `npm ci` runs);
// `npm run build -w bedrock-agent` or `node apps/cli/scripts/build.mjs` rebuilds it alone.
//
// Three CommonJS bundles (node20; no externals but Node's built-ins), each written by rename so
// that a CLI starting meanwhile reads whole files:
//   dist/client-HASH.cjs      the commands: src/dispatch.ts and all it imports (protobuf
//                             descriptors, Connect). Named by its content's hash; the entry
//                             names the one it was built with. src/bundle/client.ts loads
//                             it with a V8 code cache, client-HASH.cjs.NODEVERSION-ARCH.cache,
//                             that the first command writes.
//   dist/acp-HASH.cjs         `bedrock acp`: src/acp/command.ts with the ACP SDK and zod, and
//                             its own copy of the client code it uses; src/bundle/acp.ts
//                             loads it for that command only, so the others never parse it.
//   dist/bedrock.cjs          the entry (src/bundle/entry.ts): the command line and
//                             `--help`; loads the client only when a command runs. Written last.
//   dist/*.map                source maps (used only under NODE_OPTIONS=--enable-source-maps)
//   dist/inputs.json          the repository's source files in them and the client, which
//                             bin/bedrock.js compares with the entry's mtime to tell whether
//                             it is fresh
//   dist/clients.json         the client and ACP bundles of this build and the one before it,
//                             which are kept (a CLI started from it may still load them); older
//                             ones, their caches and other leftovers are removed.
//
// CommonJS, not ESM: Node 20 loads an ESM program through its ESM loader (about 10 ms more
// than `node -e 0` before any code of ours runs), and only a script, not a module, can be
// compiled from a V8 code cache there.
import { createHash } from 'node:crypto';
import { builtinModules } from 'node:module';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const pkg = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = join(pkg, 'dist');
const entry = join(out, 'bedrock.cjs');
const cli = join(pkg, 'src');

/**
 * The CLI imports two functions (generateToken, hashToken) through the `@bedrock/platform/server`
 * barrel, which re-exports the servers' plumbing (pino, prom-client, OpenTelemetry). The
 * bundle takes them from the one module that defines them; an import of anything else from
 * that package fails the build ("No matching export").
 */
const tokenEntriesOnly = {
  name: 'token-entries-only',
  setup(build) {
    build.onResolve({ filter: /^@bedrock\/platform\/server$/ }, async (args) => {
      if (args.pluginData === 'resolved') return undefined;
      const r = await build.resolve(args.path, {
        kind: args.kind,
        importer: args.importer,
        resolveDir: args.resolveDir,
        pluginData: 'resolved',
      });
      if (r.errors.length > 0) return undefined;
      return { path: join(dirname(r.path), 'token-entries.ts') };
    });
  },
};

/**
 * @connectrpc/connect-node imports node:http2, node:https and node:zlib at its top, but a
 * command over http:// without compressed answers uses none of them: they are replaced by
 * stand-ins that load the real module on first use (src/bundle/lazy-*.ts).
 */
const lazyBuiltins = {
  name: 'lazy-builtins',
  setup(build) {
    build.onResolve({ filter: /^(node:)?(http2|https|zlib)$/ }, (args) => {
      if (!/[/\\]node_modules[/\\]@connectrpc[/\\]connect-node[/\\]/.test(args.importer)) return undefined;
      return { path: join(cli, 'bundle', `lazy-${args.path.replace(/^node:/, '')}.ts`) };
    });
  },
};

/**
 * In the entry, run.ts's `import('./dispatch.ts')` is the loader of the client bundle, and its
 * `import('./acp/command.ts')` the loader of the ACP bundle.
 */
const clientLoader = {
  name: 'client-loader',
  setup(build) {
    build.onResolve({ filter: /^\.\/(dispatch|acp\/command)\.ts$/ }, (args) => {
      if (args.importer !== join(cli, 'run.ts')) return undefined;
      return { path: join(cli, 'bundle', args.path === './dispatch.ts' ? 'client.ts' : 'acp.ts') };
    });
  },
};

const common = {
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: 'node20',
  // Smaller to parse; names kept so that error and class names read as in the sources.
  minify: true,
  keepNames: true,
  sourcemap: 'linked',
  legalComments: 'none',
  // Node 20's global Headers loads all of undici on first use (about 30 ms); Connect's uses get
  // a plain class instead (src/bundle/headers.ts).
  inject: [join(cli, 'bundle', 'headers.ts')],
  // A stand-in that lacks a function connect-node calls fails the build, not a command.
  logOverride: { 'import-is-undefined': 'error' },
  metafile: true,
  write: false,
  logLevel: 'warning',
};

const client = await esbuild.build({
  ...common,
  entryPoints: [join(cli, 'dispatch.ts')],
  outfile: join(out, 'client.cjs'),
  plugins: [tokenEntriesOnly, lazyBuiltins],
});
const clientCode = client.outputFiles.find((f) => f.path.endsWith('.cjs'));
const clientName = `client-${createHash('sha256').update(clientCode.contents).digest('hex').slice(0, 16)}.cjs`;

const acp = await esbuild.build({
  ...common,
  entryPoints: [join(cli, 'acp', 'command.ts')],
  outfile: join(out, 'acp.cjs'),
  plugins: [tokenEntriesOnly, lazyBuiltins],
});
const acpCode = acp.outputFiles.find((f) => f.path.endsWith('.cjs'));
const acpName = `acp-${createHash('sha256').update(acpCode.contents).digest('hex').slice(0, 16)}.cjs`;

const main = await esbuild.build({
  ...common,
  entryPoints: [join(cli, 'bundle', 'entry.ts')],
  outfile: entry,
  plugins: [clientLoader],
  define: { BEDROCK_CLI_CLIENT: JSON.stringify(clientName), BEDROCK_CLI_ACP: JSON.stringify(acpName) },
});

const bundles = [...client.outputFiles, ...acp.outputFiles, ...main.outputFiles].filter((f) => f.path.endsWith('.cjs'));
// Loaded as scripts (vm.Script has no import() callback) and by require(): no ESM left.
for (const f of bundles) {
  if (/\bimport\(|import\.meta/.test(f.text)) throw new Error(`${relative(pkg, f.path)}: the bundle still holds import() or import.meta`);
}
// The installed package has no node_modules: the bundles may require Node's built-ins only.
const builtins = new Set(builtinModules);
for (const f of bundles) {
  for (const [, id] of f.text.matchAll(/\brequire\("([^"]+)"\)/g)) {
    if (!builtins.has(id.replace(/^node:/, ''))) throw new Error(`${relative(pkg, f.path)}: requires ${id}, which is not bundled`);
  }
}

await mkdir(out, { recursive: true });
const root = resolve(pkg, '..', '..');
const inputs = [...new Set([client, acp, main].flatMap((b) => Object.keys(b.metafile.inputs)))]
  .map((p) => resolve(process.cwd(), p))
  .filter((p) => !p.split(/[/\\]/).includes('node_modules'))
  .map((p) => relative(out, p))
  .sort();
inputs.push(relative(out, fileURLToPath(import.meta.url)));
// And the client and ACP bundles: the entry cannot run without them (a missing file reads as out of date).
inputs.push(clientName, acpName);

const previous = await readFile(join(out, 'clients.json'), 'utf8')
  .then((text) => JSON.parse(text))
  .catch(() => []);
// This build's bundles and the previous build's (an older clients.json lists one client).
const keep = [clientName, acpName, ...previous.filter((name) => name !== clientName && name !== acpName)].slice(0, 4);
/** A bundle's source map is named after the bundle and referenced by it. */
const renamed = (base, name) => (f) => ({
  path: f.path.replace(new RegExp(`${base}\\.cjs(\\.map)?$`), (_, map) => name + (map ?? '')),
  contents: f.path.endsWith('.cjs')
    ? Buffer.from(f.text.replace(`sourceMappingURL=${base}.cjs.map`, `sourceMappingURL=${name}.map`))
    : f.contents,
});
const files = [
  ...client.outputFiles.map(renamed('client', clientName)),
  ...acp.outputFiles.map(renamed('acp', acpName)),
  ...main.outputFiles.map((f) => ({ path: f.path, contents: f.contents })),
  { path: join(out, 'inputs.json'), contents: `${JSON.stringify(inputs, null, 1)}\n` },
  { path: join(out, 'clients.json'), contents: `${JSON.stringify(keep)}\n` },
];
// The entry last: its mtime, newer than every input's, is what marks the set fresh.
files.sort((a, b) => Number(a.path === entry) - Number(b.path === entry));
const tmp = `.tmp-${process.pid}`;
for (const f of files) {
  await writeFile(f.path + tmp, f.contents);
  await rename(f.path + tmp, f.path);
}

// Older clients with their maps and caches, and what earlier layouts left (bedrock.mjs, chunks).
const wanted = new Set(files.map((f) => relative(out, f.path)));
for (const name of await readdir(out)) {
  if (wanted.has(name) || keep.some((c) => name === c || name.startsWith(`${c}.`))) continue;
  if (/^((client|acp)-[0-9a-f]+\.cjs|bedrock\.mjs|chunk-\w+\.mjs|chunks\.json)/.test(name)) await rm(join(out, name), { force: true });
}

const kib = (f) => `${(f.contents.length / 1024).toFixed(0)} KiB`;
console.log(
  `bedrock CLI built: ${relative(root, entry)} (${kib(main.outputFiles.find((f) => f.path === entry))}), ${relative(root, join(out, clientName))} (${kib(clientCode)}) and ${relative(root, join(out, acpName))} (${kib(acpCode)}), ${inputs.length - 2} source files`,
);
