/**
 * acp/command.ts as the CLI bundle sees it (scripts/build.mjs resolves run.ts's import of
 * './acp/command.ts' here): loads the bundle of `bedrock acp`, dist/acp-HASH.cjs, which holds
 * the ACP SDK (and zod) besides the client code it uses, so that no other command loads them.
 * A long-running process: no code cache.
 */
import { join } from 'node:path';
import type * as Command from '../acp/command.ts';

/** The ACP bundle's file name (acp-HASH.cjs), set by scripts/build.mjs. */
declare const BEDROCK_CLI_ACP: string;

export function acpCommand(...args: Parameters<typeof Command.acpCommand>): ReturnType<typeof Command.acpCommand> {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const command = require(join(__dirname, BEDROCK_CLI_ACP)) as typeof Command;
  return command.acpCommand(...args);
}
