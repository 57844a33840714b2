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

/**
 * `bedrock` when the one on the user's PATH is this checkout's (npm install -g ./apps/cli), else
 * the bin's path, which runs from any directory. The `node_modules/.bin` directories npm puts on
 * the PATH of `npm start` are not the user's: a shell they paste the line into lacks them.
 */
function cliCommand(): { command: string; onPath: boolean } {
  const bin = realpathSync(BIN);
  const userPath = (process.env.PATH ?? '').split(delimiter).filter((dir) => dir && !/[\\/]node_modules[\\/]\.bin[\\/]?$/.test(dir));
  for (const dir of userPath) {
    try {
      if (realpathSync(join(dir, 'bedrock')) === bin) return { command: 'bedrock', onPath: true };
    } catch {
      // not there
    }
  }
  return { command: shellWord(BIN), onPath: false };
}

/** The public ports and the settings that move them; an internal port is ephemeral and never busy. */
function portSetting(port: number): string {
  const http = Number(process.env.BEDROCK_PORT || 8080);
  return port === http ? 'BEDROCK_PORT' : 'BEDROCK_GRPC_PORT';
}

const bedrock = await startEmbedded().catch((err: unknown) => {
  const e = err as NodeJS.ErrnoException & { port?: number };
  // A busy port is the likeliest failure: one line naming it and the setting that moves it, no stack.
  if (e?.code === 'EADDRINUSE' && typeof e.port === 'number') {
    const setting = portSetting(e.port);
    console.error(
      `bedrock: port ${e.port} is already in use (another program, or another npm start, listens on it); set ${setting} to a free port, e.g. ${setting}=${e.port + 10} npm start`,
    );
    process.exit(1);
  }
  // Another npm start on the same data (PGlite's files are one process's): one line, no stack.
  if (e?.code === 'BEDROCK_DATA_DIR_IN_USE') {
    console.error(`bedrock: ${e.message}`);
    process.exit(1);
  }
  throw err;
});
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
