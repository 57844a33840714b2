/**
 * `bedrock.v1.McpService`, served to web-bff beside the ConversationService: the MCP servers a
 * user's conversations get. The operator's servers are listed, never added or removed here.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import {
  AddMcpServerResponseSchema,
  ListMcpServersResponseSchema,
  McpService,
  RemoveMcpServerResponseSchema,
  SetMcpServerEnabledResponseSchema,
} from '@bedrock/contracts';
import type { McpRegistry } from '../mcp/registry.ts';
import { MCP_LIMITS, mcpServerProblem, toProto, type McpServerConfig } from '../mcp/servers.ts';
import { serveService } from '@bedrock/platform/server';

export interface McpApiOptions {
  readonly registry: McpRegistry;
  readonly userOf: (ctx: HandlerContext) => string;
  /** Whether the conversation is the user's own (another user's, or none: NOT_FOUND). */
  readonly ownsConversation: (userId: string, conversationId: string) => Promise<boolean>;
}

export function registerMcpApi(router: ConnectRouter, options: McpApiOptions): void {
  const { registry, userOf } = options;
  /** The request's conversation, checked to be the caller's; '' for none. */
  async function conversationOf(user: string, id: string): Promise<string> {
    const conversationId = id.trim();
    if (conversationId === '') return '';
    if (conversationId.length > 512 || !(await options.ownsConversation(user, conversationId))) {
      throw new ConnectError(`conversation ${conversationId} not found`, Code.NotFound);
    }
    return conversationId;
  }
  serveService(router, McpService, {
    async addMcpServer(req, ctx) {
      const user = userOf(ctx);
      const conversationId = await conversationOf(user, req.conversationId);
      const server: McpServerConfig = {
        conversationId,
        name: req.name.trim(),
        command: req.command.trim(),
        args: req.args,
        env: req.env,
        trusted: false,
        timeoutMs: Number(req.timeoutMs),
        source: 'user',
      };
      const problem = mcpServerProblem(server);
      if (problem) throw new ConnectError(problem, Code.InvalidArgument);
      if (registry.operator.some((s) => s.name === server.name)) {
        throw new ConnectError(`the operator already provides a server named "${server.name}": choose another name`, Code.AlreadyExists);
      }
      if ((await registry.store.count(user, conversationId)) >= MCP_LIMITS.maxPerUser) {
        throw new ConnectError(
          `at most ${MCP_LIMITS.maxPerUser} MCP servers per user (and per conversation): remove one first`,
          Code.ResourceExhausted,
        );
      }
      if (!(await registry.store.add(user, server))) {
        throw new ConnectError(
          `you already have an MCP server named "${server.name}"${conversationId ? ' for this conversation' : ''}`,
          Code.AlreadyExists,
        );
      }
      return create(AddMcpServerResponseSchema, { server: toProto(server) });
    },
    async listMcpServers(req, ctx) {
      const user = userOf(ctx);
      const conversationId = await conversationOf(user, req.conversationId);
      return create(ListMcpServersResponseSchema, { servers: (await registry.serversFor(user, conversationId)).map(toProto) });
    },
    async removeMcpServer(req, ctx) {
      const name = req.name.trim();
      if (registry.operator.some((s) => s.name === name)) {
        throw new ConnectError(
          `"${name}" is the operator's server (BEDROCK_MCP_SERVERS); it cannot be removed here`,
          Code.FailedPrecondition,
        );
      }
      const user = userOf(ctx);
      const conversationId = await conversationOf(user, req.conversationId);
      if (!(await registry.store.remove(user, name, conversationId))) {
        throw new ConnectError(`you have no MCP server named "${name}"${conversationId ? ' for this conversation' : ''}`, Code.NotFound);
      }
      return create(RemoveMcpServerResponseSchema, {});
    },
    async setMcpServerEnabled(req, ctx) {
      const user = userOf(ctx);
      if (req.conversationId.trim() === '') {
        throw new ConnectError('conversation_id is required: a server is turned off or on for one conversation', Code.InvalidArgument);
      }
      const conversationId = await conversationOf(user, req.conversationId);
      const name = req.name.trim();
      const server = (await registry.serversFor(user, conversationId)).find((s) => s.name === name);
      if (!server) throw new ConnectError(`this conversation has no MCP server named "${name}"`, Code.NotFound);
      await registry.store.setOff(user, conversationId, name, !req.enabled);
      return create(SetMcpServerEnabledResponseSchema, { server: toProto({ ...server, disabled: !req.enabled }) });
    },
  });
}
