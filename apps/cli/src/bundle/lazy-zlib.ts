/**
 * `node:zlib` for the CLI bundle, loaded on first use (builtin.ts): the four functions
 * connect-node's gzip and brotli compression wrap with util.promisify (callback last).
 */
import type * as zlib from 'node:zlib';
import { builtin } from './builtin.ts';

type Z = typeof zlib;
const load = () => builtin<Z>('node:zlib');
const lazy =
  <K extends 'gzip' | 'gunzip' | 'brotliCompress' | 'brotliDecompress'>(name: K) =>
  (...args: unknown[]) =>
    (load()[name] as (...a: unknown[]) => void)(...args);

export const gzip = lazy('gzip') as Z['gzip'];
export const gunzip = lazy('gunzip') as Z['gunzip'];
export const brotliCompress = lazy('brotliCompress') as Z['brotliCompress'];
export const brotliDecompress = lazy('brotliDecompress') as Z['brotliDecompress'];
