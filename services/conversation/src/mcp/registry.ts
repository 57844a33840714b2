/**
 * The MCP servers a conversation gets (the operator's, then its owner's own), and their tools
 * as the model is offered them, listed by a tool-runner that starts the servers in the
 * conversation's place (its user, workspace and mode). See docs/mcp.md.
 */
import { createClient } from '@connectrpc/connect';
import { McpHostService, Mode as PMode } from '@bedrock/contracts';
import type { McpServerSpec, McpToolDefinition } from '@bedrock/contracts';
import { createBalancedTransport, serviceCredentialHeaders, type Logger } from '@bedrock/platform/server';
import type { McpStore } from './mcp-store.ts';
import type { McpOAuth } from './oauth.ts';
import { toSpec, type McpServerConfig } from './servers.ts';

/** What the registry needs of a conversation to list its tools. */
export interface McpConversation {
  readonly id: string;
  readonly ownerId: string;
  readonly cwd: string;
  readonly mode: 'restricted' | 'unrestricted';
  readonly workspace: { readonly path: string; readonly toolUid: number } | null;
}

export interface McpRegistry {
  /**
   * The operator's servers, then the owner's for all conversations, then (given one) that
   * conversation's own; a name already taken hides a later server of that name. Given a
   * conversation, the servers its owner turned off for it are marked `disabled`.
   */
  serversFor(ownerId: string, conversationId?: string): Promise<McpServerConfig[]>;
  specsFor(ownerId: string, conversationId?: string): Promise<McpServerSpec[]>;
  /** The conversation's MCP tools (not those of servers turned off); empty when it has no servers or no runner answers (logged). */
  toolsFor(conversation: McpConversation): Promise<McpToolDefinition[]>;
  readonly operator: readonly McpServerConfig[];
  readonly store: McpStore;
  /** Users' OAuth logins to remote servers; unset without BEDROCK_MCP_TOKEN_KEY. */
  readonly oauth: McpOAuth | undefined;
  close(): void;
}

export interface McpRegistryOptions {
  readonly operator: readonly McpServerConfig[];
  readonly store: McpStore;
  readonly oauth?: McpOAuth;
  readonly defaultTimeoutMs: number;
  /** The tool-runners' gRPC ports (BEDROCK_WORKSPACE_STORAGE_URL); unset: no listing, so no MCP tools. */
  readonly runnerUrls?: readonly (string | URL)[];
  readonly serviceToken: string | undefined;
  /** Deadline of a listing (servers may be started for it), ms. */
  readonly listTimeoutMs: number;
  readonly logger: Logger;
}

export function createMcpRegistry(options: McpRegistryOptions): McpRegistry {
  const { operator, store, logger } = options;
  const transport = options.runnerUrls
    ? createBalancedTransport({ name: 'tool-runner-mcp', targets: options.runnerUrls, logger })
    : undefined;
  const client = transport ? createClient(McpHostService, transport) : undefined;
  const headers = options.serviceToken ? serviceCredentialHeaders(options.serviceToken) : {};

  async function serversFor(ownerId: string, conversationId = ''): Promise<McpServerConfig[]> {
    const taken = new Set<string>();
    const servers: McpServerConfig[] = [];
    const off = await store.offIn(ownerId, conversationId);
    for (const s of [...operator, ...(await store.list(ownerId, conversationId))]) {
      if (taken.has(s.name)) continue;
      taken.add(s.name);
      servers.push(off.has(s.name) ? { ...s, disabled: true } : s);
    }
    return servers;
  }

  /** The runner's spec: a remote server's with the owner's current access token, sealed for this conversation. */
  async function specOf(ownerId: string, conversationId: string, s: McpServerConfig): Promise<McpServerSpec> {
    const spec = toSpec(s, options.defaultTimeoutMs);
    if (!s.url || !options.oauth || s.disabled) return spec;
    try {
      const token = await options.oauth.accessTokenFor(ownerId, conversationId, s);
      if (token.sealed) spec.sealedAccessToken = token.sealed;
      spec.loginRequired = token.loginRequired;
    } catch (err) {
      logger.warn({ err, server: s.name }, 'the MCP login could not be read or refreshed; the server is used without it');
    }
    return spec;
  }

  return {
    operator,
    store,
    oauth: options.oauth,
    serversFor,
    async specsFor(ownerId, conversationId = '') {
      return Promise.all((await serversFor(ownerId, conversationId)).map((s) => specOf(ownerId, conversationId, s)));
    },
    async toolsFor(c) {
      // A server turned off for the conversation is neither started nor listed.
      const servers = await Promise.all(
        (await serversFor(c.ownerId, c.id)).filter((s) => !s.disabled).map((s) => specOf(c.ownerId, c.id, s)),
      );
      if (servers.length === 0 || !client) return [];
      try {
        const res = await client.listMcpTools(
          {
            conversationId: c.id,
            mode: c.mode === 'unrestricted' ? PMode.UNRESTRICTED : PMode.RESTRICTED,
            cwd: c.cwd,
            ...(c.workspace ? { toolUid: c.workspace.toolUid, toolGid: c.workspace.toolUid, workspacePath: c.workspace.path } : {}),
            servers,
          },
          { headers, timeoutMs: options.listTimeoutMs },
        );
        if (Object.keys(res.problems).length > 0)
          logger.warn({ conversation_id: c.id, problems: res.problems }, 'some MCP servers could not be listed');
        return res.tools;
      } catch (err) {
        logger.warn({ err, conversation_id: c.id }, 'MCP tools could not be listed: the request goes without them');
        return [];
      }
    },
    close: () => transport?.close(),
  };
}
