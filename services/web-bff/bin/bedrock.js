#!/usr/bin/env node
// `bedrock` CLI (docs/cli.md, "How it runs"). Runs the bundle dist/cli/bedrock.mjs that
// `npm run build` (run by `npm ci`) makes with bin/build-cli.mjs, when it is there and newer
// than every source file in it; otherwise the TypeScript sources through tsx (about 1 s more
// to start), saying so in one line on stderr. BEDROCK_CLI=source picks the sources always,
// without the line.
import { readFileSync, statSync } from 'node:fs';

const bundle = new URL('../dist/cli/bedrock.mjs', import.meta.url);

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
    inputs = JSON.parse(readFileSync(new URL('../dist/cli/inputs.json', import.meta.url), 'utf8'));
  } catch {
    return 'missing its inputs.json';
  }
  for (const input of inputs) {
    const file = new URL(input, bundle);
    let mtime;
    try {
      mtime = statSync(file).mtimeMs;
    } catch {
      return `out of date (${decodeURIComponent(file.pathname)} is gone)`;
    }
    if (mtime > built) return `out of date (${decodeURIComponent(file.pathname)} changed)`;
  }
  return '';
}

const source = process.env.BEDROCK_CLI === 'source';
const why = source ? 'not wanted' : staleness();
if (why === '') {
  await import(bundle.href);
} else {
  if (!source) process.stderr.write(`bedrock: note: the CLI bundle is ${why}; running the sources through tsx (slower; \`npm run build -w @bedrock/web-bff\` rebuilds it)\n`);
  const { register } = await import('tsx/esm/api');
  register();
  await import('../src/cli/main.ts');
}
