/**
 * `make bench BENCH=cli-start`: the `bedrock` CLI from exec to exit, `--help` and `ls` (against the
 * embedded product in this process), run from the bundle (`ls` also without its code cache) and from the
 * sources through tsx, beside `node -e 0`; the variants take turns, run by run. Prints median, p90 and
 * minimum, ratios and the 150 ms target; asserts nothing. docs/cli.md, "How it runs" (BENCH_RUNS).
 */
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEmbedded } from '@bedrock/embedded';
import { createLogger } from '@bedrock/platform/server';

const RUNS = Number(process.env.BENCH_RUNS ?? 20);
const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));
const BIN = here('../bin/bedrock.js');

interface Variant {
  name: string;
  args: string[];
  env?: Record<string, string>;
}

/** Wall time of one run, in ms; throws when it fails. */
function time(v: Variant, env: Record<string, string>): Promise<number> {
  const start = performance.now();
  return new Promise((resolve, reject) => {
    execFile(process.execPath, v.args, { env: { ...env, ...v.env } }, (err, _stdout, stderr) => {
      const ms = performance.now() - start;
      if (err) reject(new Error(`${v.name}: ${err.message} ${stderr}`));
      else if (stderr.includes('bedrock: note:')) reject(new Error(`${v.name}: ${stderr.trim()}`));
      else resolve(ms);
    });
  });
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil(q * s.length) - 1)] ?? NaN;
};
const ms = (x: number) => `${x.toFixed(0).padStart(5)} ms`;

// The bundle as `npm ci` leaves it; built here when a source changed since.
const probe = spawnSync(process.execPath, [BIN, '--help'], { encoding: 'utf8' });
if (probe.stderr.includes('bedrock: note:')) {
  console.log(probe.stderr.trim(), '— building it');
  spawnSync(process.execPath, [here('../scripts/build.mjs')], { stdio: 'inherit' });
}

const dataDir = mkdtempSync(join(tmpdir(), 'bedrock-bench-cli-'));
const bedrock = await startEmbedded({
  env: { ...process.env, BEDROCK_DATA_DIR: dataDir, BEDROCK_PORT: '0', BEDROCK_GRPC_PORT: '0', LOG_LEVEL: 'warn' },
  logger: createLogger({ service: 'bench', level: 'warn' }),
});
const env = { PATH: process.env.PATH ?? '', HOME: dataDir, BEDROCK_URL: bedrock.httpUrl, BEDROCK_TOKEN: bedrock.token };
const source = { BEDROCK_CLI: 'source' };
const TARGET_MS = 150;
const variants: Variant[] = [
  { name: 'node -e 0', args: ['-e', '0'] },
  { name: 'bedrock --help (bundle)', args: [BIN, '--help'] },
  { name: 'bedrock --help (tsx)', args: [BIN, '--help'], env: source },
  { name: 'bedrock ls (bundle)', args: [BIN, 'ls'] },
  { name: 'bedrock ls (no code cache)', args: [BIN, 'ls'], env: { BEDROCK_CLI_CODE_CACHE: '0' } },
  { name: 'bedrock ls (tsx)', args: [BIN, 'ls'], env: source },
];
const loadBefore = loadavg()[0]!;
const samples = new Map<string, number[]>(variants.map((v) => [v.name, []]));
try {
  for (const v of variants) await time(v, env); // warm the page cache and the server
  for (let i = 0; i < RUNS; i++) for (const v of variants) samples.get(v.name)!.push(await time(v, env));
} finally {
  await bedrock.stop();
  rmSync(dataDir, { recursive: true, force: true });
}

const median = (name: string) => quantile(samples.get(name)!, 0.5);
const base = median('node -e 0');
console.log(`bedrock CLI start, ${RUNS} runs each, exec to exit (ls: against the embedded product at ${bedrock.httpUrl})`);
console.log(`  load average (1 min) ${loadBefore.toFixed(1)} before, ${loadavg()[0]!.toFixed(1)} after, on ${availableParallelism()} CPUs`);
console.log(`  ${'variant'.padEnd(27)} ${'median'.padStart(8)} ${'p90'.padStart(8)} ${'min'.padStart(8)}  ${'over node'.padStart(9)}`);
for (const v of variants) {
  const xs = samples.get(v.name)!;
  console.log(
    `  ${v.name.padEnd(27)} ${ms(quantile(xs, 0.5))} ${ms(quantile(xs, 0.9))} ${ms(Math.min(...xs))}  ${ms(quantile(xs, 0.5) - base)}`,
  );
}
for (const cmd of ['bedrock --help', 'bedrock ls']) {
  const bundle = median(`${cmd} (bundle)`);
  const tsx = median(`${cmd} (tsx)`);
  const verdict = bundle <= TARGET_MS ? 'met' : `missed by ${(bundle - TARGET_MS).toFixed(0)} ms`;
  console.log(
    `  ${cmd}: median ${bundle.toFixed(0)} ms, target <= ${TARGET_MS} ms ${verdict}; tsx / bundle ${(tsx / bundle).toFixed(1)}x; bundle / node -e 0 ${(bundle / base).toFixed(2)}x`,
  );
}
console.log(
  `  bedrock ls: no code cache / code cache ${(median('bedrock ls (no code cache)') / median('bedrock ls (bundle)')).toFixed(2)}x (median)`,
);
