/** Node handler types of connect-node, which its package entry does not export by name. */
import type { ConnectNodeAdapterOptions } from '@connectrpc/connect-node';

/** `(req, res) => void` for both node:http and node:http2 (compat API). */
export type NodeHandler = NonNullable<ConnectNodeAdapterOptions['fallback']>;
export type NodeServerRequest = Parameters<NodeHandler>[0];
export type NodeServerResponse = Parameters<NodeHandler>[1];
