/**
 * `make bench`: runs every benchmark file (bench/*.bench.ts, services/* /bench/*.bench.ts,
 * packages/* /bench/*.bench.ts, apps/* /bench/*.bench.ts), each in its own process, and prints what each reports.
 * Benchmarks print figures and ratios; they assert nothing. Pass names to pick some.
 */
import { spawnSync } from 'node:child_process';
import { readdirSync, existsSync } from 'node:fs';
import { join } from 'node:path';

const root = new URL('..', import.meta.url).pathname;
const dirs = ['bench'];
for (const group of ['services', 'packages', 'apps']) {
  for (const name of readdirSync(join(root, group))) dirs.push(join(group, name, 'bench'));
}
const files = dirs
  .filter((d) => existsSync(join(root, d)))
  .flatMap((d) =>
    readdirSync(join(root, d))
      .filter((f) => f.endsWith('.bench.ts'))
      .map((f) => join(d, f)),
  )
  .filter((f) => process.argv.length <= 2 || process.argv.slice(2).some((want) => f.includes(want)));

let failures = 0;
for (const file of files) {
  console.log(`\n=== ${file}`);
  const run = spawnSync(process.execPath, ['--import', 'tsx', join(root, file)], { stdio: 'inherit', cwd: root });
  if (run.status !== 0) {
    failures++;
    console.log(`(${file} exited with ${run.status})`);
  }
}
if (files.length === 0) console.log('no benchmarks matched');
process.exit(failures ? 1 : 0);
