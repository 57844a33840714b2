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
  close(): void;
}

export interface McpRegistryOptions {
  readonly operator: readonly McpServerConfig[];
  readonly store: McpStore;
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

  return {
    operator,
    store,
    serversFor,
    async specsFor(ownerId, conversationId) {
      return (await serversFor(ownerId, conversationId)).map((s) => toSpec(s, options.defaultTimeoutMs));
    },
    async toolsFor(c) {
      // A server turned off for the conversation is neither started nor listed.
      const servers = (await serversFor(c.ownerId, c.id)).filter((s) => !s.disabled).map((s) => toSpec(s, options.defaultTimeoutMs));
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
