/**
 * dispatch.ts as the CLI bundle sees it (scripts/build.mjs resolves run.ts's import of './dispatch.ts'
 * here): loads the commands' bundle, dist/client-HASH.cjs, with a V8 code cache next to it, so that
 * neither its source nor its functions at their first call are compiled again. docs/cli.md, "How it runs".
 */
import { accessSync, constants, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Script } from 'node:vm';
import type * as Dispatch from '../dispatch.ts';

/** The commands' bundle's file name (client-HASH.cjs), set by scripts/build.mjs. */
declare const BEDROCK_CLI_CLIENT: string;

type Client = typeof Dispatch;

let client: Client | undefined;

export function dispatch(...args: Parameters<Client['dispatch']>): ReturnType<Client['dispatch']> {
  client ??= load();
  return client.dispatch(...args);
}

/**
 * Requires the client bundle, compiled from its cache `client-HASH.cjs.NODEVERSION-ARCH.cache` when
 * there is one. The cache is written when the command ends if there was none or V8 refused it (another
 * V8, other flags): it holds the code of every function that command ran. The bundle's name carries its
 * content's hash, so a cache can only meet the code it was made from; a directory that cannot be
 * written just means no cache. Under --enable-source-maps the bundle is required plainly, so that stack
 * traces map to the sources. BEDROCK_CLI_CODE_CACHE=0 neither reads nor writes the cache (the
 * benchmark's comparison).
 */
function load(): Client {
  const file = join(__dirname, BEDROCK_CLI_CLIENT);
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  if (process.sourceMapsEnabled) return require(file) as Client;
  const cacheFile = `${file}.${process.version}-${process.arch}.cache`;
  const useCache = process.env.BEDROCK_CLI_CODE_CACHE !== '0';
  let cachedData: Buffer | undefined;
  try {
    if (useCache) cachedData = readFileSync(cacheFile);
  } catch {
    // none yet
  }
  // The same wrapper as Node's for a CommonJS module.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${readFileSync(file, 'utf8')}\n});`, {
    filename: file,
    cachedData,
  });
  const module = { exports: {} as Client };
  script.runInThisContext()(module.exports, require, module, file, __dirname);
  if (useCache && (cachedData === undefined || script.cachedDataRejected)) process.once('exit', () => save(script, cacheFile));
  return module.exports;
}

/** Writes the code cache (by rename: a command starting meanwhile reads a whole file or none). */
function save(script: Script, cacheFile: string): void {
  const tmp = `${cacheFile}.tmp-${process.pid}`;
  try {
    accessSync(dirname(cacheFile), constants.W_OK); // before the work of making the cache
    writeFileSync(tmp, script.createCachedData());
    renameSync(tmp, cacheFile);
  } catch {
    // A read-only installation: every command compiles the bundle, as without a cache.
    try {
      unlinkSync(tmp);
    } catch {
      // not written
    }
  }
}
