// Builds the web UI into ui/dist: app.js (src/main.tsx, Preact with JSX, bundled by esbuild), app.css, index.html.
import { copyFile, mkdir, readFile, rm } from 'node:fs/promises';
import { gzipSync } from 'node:zlib';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await copyFile(join(here, 'index.html'), join(dist, 'index.html'));
await copyFile(join(here, 'favicon.svg'), join(dist, 'favicon.svg'));
await copyFile(join(here, 'src', 'app.css'), join(dist, 'app.css'));

const options = {
  entryPoints: [join(here, 'src', 'main.tsx')],
  outfile: join(dist, 'app.js'),
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  jsx: 'automatic',
  jsxImportSource: 'preact',
  minify: true,
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'warning',
};

await esbuild.build(options);
const js = await readFile(join(dist, 'app.js'));
const kib = (n) => `${(n / 1024).toFixed(0)} KiB`;
console.log(`web UI built: ${dist} (app.js ${kib(js.length)}, ${kib(gzipSync(js).length)} gzipped)`);
