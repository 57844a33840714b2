/** `node:http2` for the CLI bundle, loaded on first use (builtin.ts): what connect-node's Http2SessionManager uses. */
import type * as http2 from 'node:http2';
import { builtin } from './builtin.ts';

const load = () => builtin<typeof http2>('node:http2');

export const connect = ((...args: Parameters<typeof http2.connect>) => load().connect(...args)) as typeof http2.connect;
export const constants: typeof http2.constants = new Proxy({} as typeof http2.constants, {
  get: (_, key) => Reflect.get(load().constants, key),
});
