/** `node:https` for the CLI bundle, loaded on first use (builtin.ts): what connect-node's HTTP/1.1 client uses for https:// URLs. */
import type * as https from 'node:https';
import { builtin } from './builtin.ts';

export const request = ((...args: Parameters<typeof https.request>) =>
  builtin<typeof https>('node:https').request(...args)) as typeof https.request;
