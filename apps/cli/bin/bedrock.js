#!/usr/bin/env node
// `bedrock` CLI (docs/cli.md, "How it runs"). Runs the bundle dist/bedrock.cjs that the
// package's `npm run build` (run by the root `npm ci`) makes with scripts/build.mjs.
//
// In the checkout (src/ beside bin/), the bundle is used when it is newer than every source
// file in it; otherwise the TypeScript sources run through tsx (about 1 s more to start),
// saying so in one line on stderr. BEDROCK_CLI=source picks the sources always, without the
// line. An installed copy (`npm install -g ./apps/cli` from a packed checkout) has no sources
// and runs the bundle, which needs nothing but Node.
//
// CommonJS (bin/package.json): Node 20 starts an ES module through its ESM loader, about 10 ms
// more than a script before any code of ours runs. The sources are ESM and are imported.
'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS script */
const { existsSync, readFileSync, statSync } = require('node:fs');
const { join } = require('node:path');

const dist = join(__dirname, '..', 'dist');
const bundle = join(dist, 'bedrock.cjs');
const sources = join(__dirname, '..', 'src');

/** Why the bundle cannot be used ('' when it can). */
function staleness() {
  let built;
  try {
    built = statSync(bundle).mtimeMs;
  } catch {
    return 'missing';
  }
  // An installed package: no sources to compare with.
  if (!existsSync(sources)) return '';
  let inputs;
  try {
    inputs = JSON.parse(readFileSync(join(dist, 'inputs.json'), 'utf8'));
  } catch {
    return 'missing its inputs.json';
  }
  for (const input of inputs) {
    const file = join(dist, input);
    let mtime;
    try {
      mtime = statSync(file).mtimeMs;
    } catch {
      return `out of date (${file} is gone)`;
    }
    if (mtime > built) return `out of date (${file} changed)`;
  }
  return '';
}

const source = process.env.BEDROCK_CLI === 'source';
const why = source ? 'not wanted' : staleness();
if (why === '') {
  require(bundle).main();
} else if (!existsSync(sources)) {
  process.stderr.write(
    `bedrock: ${bundle} is missing: this copy of the CLI was installed without its build (run \`npm run build\` in apps/cli of the checkout, then install it again)\n`,
  );
  process.exitCode = 4;
} else {
  if (!source)
    process.stderr.write(
      `bedrock: note: the CLI bundle is ${why}; running the sources through tsx (slower; \`npm run build -w bedrock-agent\` rebuilds it)\n`,
    );
  (async () => {
    const { register } = await import('tsx/esm/api');
    register();
    await import('../src/main.ts');
  })();
}
