// The conformance CLI (@modelcontextprotocol/conformance 0.1.16) imports `globSync` from `fs`,
// which Node 20 lacks (it came in Node 22). Only its `tier-check` command calls it, never the
// client mode used here, so its `fs` is this module: Node's own plus a globSync that says so.
import { register } from 'node:module';

register(
  'data:text/javascript,' +
    encodeURIComponent(`
export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL?.includes('/@modelcontextprotocol/conformance/')) {
    return { url: 'data:text/javascript,' + encodeURIComponent(
      "import fs from 'node:fs'; export * from 'node:fs'; export default fs;" +
      "export const globSync = fs.globSync ?? (() => { throw new Error('fs.globSync needs Node 22'); });"), shortCircuit: true };
  }
  return next(specifier, context);
}`),
);
