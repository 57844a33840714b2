/**
 * `npm start`: the whole product on its embedded defaults, in this one process. See
 * apps/embedded and docs/embedded.md. Stops cleanly on Ctrl-C or SIGTERM.
 */
import { realpathSync } from 'node:fs';
import { homedir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { onShutdown } from '@bedrock/platform/server';
import { startEmbedded } from '@bedrock/embedded';

/** The CLI's bin in this checkout (apps/cli, the package bedrock-agent). */
const BIN = fileURLToPath(new URL('../apps/cli/bin/bedrock.js', import.meta.url));

/** A word for the shell: as it is when safe, else in single quotes. */
const shellWord = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** `bedrock` when the one on the PATH is this checkout's (npm install -g ./apps/cli), else the bin's path, which runs from any directory. */
function cliCommand(): { command: string; onPath: boolean } {
  const bin = realpathSync(BIN);
  for (const dir of (process.env.PATH ?? '').split(delimiter).filter(Boolean)) {
    try {
      if (realpathSync(join(dir, 'bedrock')) === bin) return { command: 'bedrock', onPath: true };
    } catch {
      // not there
    }
  }
  return { command: shellWord(BIN), onPath: false };
}

const bedrock = await startEmbedded();
// What the CLI needs to find this product: its address unless the default, and the data
// directory (where the token is) unless the default; printed so that the line works as is.
const needs = [
  ...(bedrock.httpUrl === 'http://127.0.0.1:8080' ? [] : [`BEDROCK_URL=${bedrock.httpUrl}`]),
  ...(bedrock.dataDir === join(homedir(), '.bedrock') ? [] : [`BEDROCK_DATA_DIR=${shellWord(bedrock.dataDir)}`]),
];
const { command, onPath } = cliCommand();
const cli = [...needs, command].join(' ');
console.log(`
Bedrock is running (embedded: PostgreSQL in-process, in-process queues, data in ${bedrock.dataDir}).
${bedrock.offline ? 'Model: the OFFLINE DEMO model (no ANTHROPIC_API_KEY set). It is not a language model: try "$ ls" lines, /write, /think, /think-long, /cut, /upgrade, /agents, /usage.\n' : ''}
  Web UI:   ${bedrock.httpUrl}/?token=${bedrock.token}
  gRPC:     ${bedrock.grpcUrl}   (token in ${bedrock.dataDir}/token)
  Tools:    ${bedrock.toolIsolation}
  Places:   ${bedrock.hostPaths ? 'host paths on (one user: conversations may use any directory here; BEDROCK_HOST_PATHS=off for workspaces only, and to add users)' : 'workspaces only (each user their own uid and files; docs/workspaces.md)'}
  Try:      ID=$(${cli} new --cwd "$PWD") && ${cli} send "$ID" '$ ls' --wait
${onPath ? '' : '            (npm install -g ./apps/cli puts `bedrock` on your PATH; docs/cli.md)\n'}
Press Ctrl-C to stop.`);
onShutdown(() => bedrock.stop(), { graceMs: 20_000 });
