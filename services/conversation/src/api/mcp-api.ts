/**
 * `bedrock.v1.McpService`, served to web-bff beside the ConversationService: the MCP servers a
 * user's conversations get. The operator's servers are listed, never added or removed here.
 */
import { Code, ConnectError, type ConnectRouter, type HandlerContext } from '@connectrpc/connect';
import { create } from '@bufbuild/protobuf';
import {
  AddMcpServerResponseSchema,
  CompleteMcpLoginResponseSchema,
  ListMcpServersResponseSchema,
  LogoutMcpServerResponseSchema,
  StartMcpLoginResponseSchema,
  McpService,
  RemoveMcpServerResponseSchema,
  SetMcpServerEnabledResponseSchema,
} from '@bedrock/contracts';
import type { McpRegistry } from '../mcp/registry.ts';
import { MCP_LIMITS, mcpServerProblem, toProto, type McpServerConfig } from '../mcp/servers.ts';
import { McpLoginError, type McpOAuth } from '../mcp/oauth.ts';

const LOGIN_CODES = {
  invalid: Code.InvalidArgument,
  not_found: Code.NotFound,
  precondition: Code.FailedPrecondition,
  unavailable: Code.Unavailable,
} as const;

async function loginCall<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (err instanceof McpLoginError) throw new ConnectError(err.message, LOGIN_CODES[err.kind]);
    throw err;
  }
}
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
  function oauthOrRefuse(): McpOAuth {
    if (!registry.oauth) {
      throw new ConnectError('logins to MCP servers are off: the operator has not set BEDROCK_MCP_TOKEN_KEY', Code.FailedPrecondition);
    }
    return registry.oauth;
  }
  /** The caller's remote server of that name (for all conversations: the operator's or their own). */
  async function remoteServer(user: string, name: string): Promise<McpServerConfig> {
    const server = (await registry.serversFor(user)).find((s) => s.name === name.trim());
    if (!server) throw new ConnectError(`you have no MCP server named "${name.trim()}"`, Code.NotFound);
    if (!server.url)
      throw new ConnectError(`"${server.name}" is a stdio server: only remote (url) servers have a login`, Code.FailedPrecondition);
    return server;
  }
  serveService(router, McpService, {
    async addMcpServer(req, ctx) {
      const user = userOf(ctx);
      const conversationId = await conversationOf(user, req.conversationId);
      const server: McpServerConfig = {
        conversationId,
        name: req.name.trim(),
        command: req.command.trim(),
        ...(req.url.trim() ? { url: req.url.trim() } : {}),
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
      const servers = await registry.serversFor(user, conversationId);
      const statuses = (await registry.oauth?.statuses(user, servers)) ?? new Map();
      return create(ListMcpServersResponseSchema, { servers: servers.map((s) => toProto(s, statuses.get(s.name))) });
    },
    async startMcpLogin(req, ctx) {
      const user = userOf(ctx);
      const oauth = oauthOrRefuse();
      const server = await remoteServer(user, req.name);
      if (req.redirectUri.trim() === '') throw new ConnectError('redirect_uri is required (web-bff sets it)', Code.InvalidArgument);
      const url = await loginCall(() => oauth.start(user, server, req.redirectUri.trim()));
      return create(StartMcpLoginResponseSchema, { authorizationUrl: url });
    },
    async completeMcpLogin(req, ctx) {
      const user = userOf(ctx);
      const oauth = oauthOrRefuse();
      const name = await loginCall(() =>
        oauth.complete(user, req.redirectedUrl, async (n) => (await registry.serversFor(user)).find((s) => s.name === n)),
      );
      return create(CompleteMcpLoginResponseSchema, { name });
    },
    async logoutMcpServer(req, ctx) {
      const user = userOf(ctx);
      const oauth = oauthOrRefuse();
      const server = await remoteServer(user, req.name);
      return create(LogoutMcpServerResponseSchema, { revoked: await oauth.logout(user, server) });
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
