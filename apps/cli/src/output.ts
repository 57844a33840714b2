/** Where the CLI writes: stdout and stderr (tests pass their own). Imports little, so `--help` loads it cheaply. */
import { terminalSafe } from './terminal-text.ts';

export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export const stdio: Output & { readonly std: true } = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
  std: true,
};

/**
 * Whether `output` is the process's stdout and stderr (not a test's capture). By a mark, not
 * by identity: the bundle has a copy of this module in the entry and another in the client.
 */
export function isStdio(output: Output): boolean {
  return (output as { std?: unknown }).std === true;
}

/**
 * `output` with every write cleaned of terminal controls but the CLI's own colours
 * (terminal-text.ts): whatever a command prints of the model's, a tool's or the server's text
 * cannot drive the terminal. Keeps the stdio mark.
 */
export function safeOutput(output: Output): Output {
  if ((output as { safe?: unknown }).safe === true) return output;
  return {
    out: (text) => output.out(terminalSafe(text)),
    err: (text) => output.err(terminalSafe(text)),
    safe: true,
    ...(isStdio(output) ? { std: true } : {}),
  } as Output;
}

/** The exit code of a command whose reader went away (`bedrock ls | head -1`): 128 + SIGPIPE, as a shell reports a tool killed by it. */
export const EXIT_CLOSED_PIPE = 141;

/**
 * A closed stdout or stderr (the reader of a pipe exited) ends the command at once and quietly,
 * with EXIT_CLOSED_PIPE, as Unix tools do; without this Node reports the EPIPE write error with a
 * stack trace. Node ignores SIGPIPE, so the failed write is the only sign.
 */
export function endQuietlyOnClosedPipe(): void {
  const onError = (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE' || err.code === 'ERR_STREAM_DESTROYED') process.exit(EXIT_CLOSED_PIPE);
    throw err;
  };
  process.stdout.on('error', onError);
  process.stderr.on('error', onError);
}
