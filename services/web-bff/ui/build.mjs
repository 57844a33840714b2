// Builds the web UI into ui/dist: app.js (src/main.ts bundled by esbuild), app.css, index.html.
import { copyFile, mkdir, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as esbuild from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const dist = join(here, 'dist');

await rm(dist, { recursive: true, force: true });
await mkdir(dist, { recursive: true });
await copyFile(join(here, 'index.html'), join(dist, 'index.html'));
await copyFile(join(here, 'src', 'app.css'), join(dist, 'app.css'));

const options = {
  entryPoints: [join(here, 'src', 'main.ts')],
  outfile: join(dist, 'app.js'),
  bundle: true,
  format: 'esm',
  platform: 'browser',
  target: ['es2022'],
  minify: true,
  sourcemap: true,
  legalComments: 'none',
  logLevel: 'warning',
};

const result = await esbuild.build({ ...options, metafile: true });
const js = Object.entries(result.metafile.outputs).find(([k]) => k.endsWith('app.js'));
console.log(`web UI built: ${dist} (app.js ${((js?.[1].bytes ?? 0) / 1024).toFixed(0)} KiB)`);
