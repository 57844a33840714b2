#!/usr/bin/env node
// `bedrock` CLI (docs/cli.md, "How it runs"). Runs the bundle dist/cli/bedrock.cjs that
// `npm run build` (run by `npm ci`) makes with bin/build-cli.mjs, when it is there and newer
// than every source file in it; otherwise the TypeScript sources through tsx (about 1 s more
// to start), saying so in one line on stderr. BEDROCK_CLI=source picks the sources always,
// without the line.
//
// CommonJS (bin/package.json): Node 20 starts an ES module through its ESM loader, about 10 ms
// more than a script before any code of ours runs. The sources are ESM and are imported.
'use strict';
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS script */
const { readFileSync, statSync } = require('node:fs');
const { join } = require('node:path');

const dist = join(__dirname, '..', 'dist', 'cli');
const bundle = join(dist, 'bedrock.cjs');

/** Why the bundle cannot be used ('' when it can). */
function staleness() {
  let built;
  try {
    built = statSync(bundle).mtimeMs;
  } catch {
    return 'missing';
  }
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
} else {
  if (!source)
    process.stderr.write(
      `bedrock: note: the CLI bundle is ${why}; running the sources through tsx (slower; \`npm run build -w @bedrock/web-bff\` rebuilds it)\n`,
    );
  (async () => {
    const { register } = await import('tsx/esm/api');
    register();
    await import('../src/cli/main.ts');
  })();
}
