/**
 * Loads a Node built-in module when first needed, not when the bundle starts: the lazy-*.ts
 * stand-ins that scripts/build.mjs puts in place of the built-ins @connectrpc/connect-node
 * imports but a `bedrock` command over http:// never uses (http2, https, zlib; together about
 * 15 ms to load at every start). Bundle-only code: the bundle is CommonJS, `require` its own.
 */
export function builtin<T>(id: string): T {
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  return require(id) as T;
}
