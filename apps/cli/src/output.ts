/** Where the CLI writes: stdout and stderr (tests pass their own). Imports nothing, so `--help` loads it cheaply. */
export interface Output {
  out(text: string): void;
  err(text: string): void;
}

export const stdio: Output = {
  out: (text) => void process.stdout.write(text),
  err: (text) => void process.stderr.write(text),
};
