/**
 * The embedded product for the MCP end-to-end tests: offline model, real sandbox, the
 * operator's servers given as BEDROCK_MCP_SERVERS, a workspace owned by the tool user (nobody)
 * with `note.txt` in it, and Connect clients of ConversationService and McpService with the
 * local token. The helpers drive turns through the public API the way a client does.
 */
import { chownSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { expect } from '@jest/globals';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { ConversationService, McpService, StateKind } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../../src/index.ts';

const NOBODY = 65534;
const asRoot = process.getuid?.() === 0;
const repo = new URL('../../../../', import.meta.url).pathname;

/** Third-party servers from npm (devDependencies), and this repository's fixture server. */
export const SERVERS = {
  everything: join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js'),
  filesystem: join(repo, 'node_modules/@modelcontextprotocol/server-filesystem/dist/index.js'),
  fixture: join(repo, 'services/tool-runner/test/fixtures/mcp-fixture-server.mjs'),
};

export interface ToolResult {
  content: string;
  isError: boolean;
}

export interface McpEmbedded {
  readonly bedrock: RunningEmbedded;
  readonly conversations: Client<typeof ConversationService>;
  readonly mcp: Client<typeof McpService>;
  /** The workspace directory (owned by the tool user when run as root), with note.txt. */
  readonly workspace: string;
  /** Polls until the conversation is in one of `kinds`. */
  waitFor(id: string, kinds: StateKind[], timeoutMs?: number): Promise<void>;
  /** Every tool_result of the conversation, in order. */
  results(id: string): Promise<ToolResult[]>;
  /** Sends `lines` as one message, waits for rest, and returns the tool results it made (one per line). */
  turn(id: string, lines: string[]): Promise<ToolResult[]>;
  /** The text of the conversation's last message. */
  lastText(id: string): Promise<string>;
  close(): Promise<void>;
}

export interface McpEmbeddedOptions {
  /** A name for the temporary directories. */
  readonly label: string;
  /** BEDROCK_MCP_SERVERS, as an object, given the workspace directory. */
  readonly servers: (workspace: string) => Record<string, unknown>;
  /** More of the product's environment. */
  readonly env?: Record<string, string>;
}

export async function startMcpEmbedded(options: McpEmbeddedOptions): Promise<McpEmbedded> {
  const dataDir = mkdtempSync(join(tmpdir(), `bedrock-${options.label}-data-`));
  const workspace = mkdtempSync(join(tmpdir(), `bedrock-${options.label}-ws-`));
  writeFileSync(join(workspace, 'note.txt'), 'a note in the workspace\n');
  if (asRoot) {
    // The workspace belongs to a user; tools (and MCP servers) run as that user.
    chownSync(workspace, NOBODY, NOBODY);
    chownSync(join(workspace, 'note.txt'), NOBODY, NOBODY);
  }
  const bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      BEDROCK_MCP_SERVERS: JSON.stringify(options.servers(workspace)),
      ...options.env,
    },
  });
  const transport = createConnectTransport({
    baseUrl: bedrock.httpUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${bedrock.token}`);
        return next(req);
      },
    ],
  });
  const conversations = createClient(ConversationService, transport);
  const mcp = createClient(McpService, transport);

  const waitFor = async (id: string, kinds: StateKind[], timeoutMs = 90_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const kind = (await conversations.getConversation({ conversationId: id })).conversation?.state?.kind;
      if (kind !== undefined && kinds.includes(kind)) return;
      if (Date.now() > deadline) throw new Error(`conversation ${id} stuck in ${kind === undefined ? '?' : StateKind[kind]}`);
      await sleep(100);
    }
  };
  const results = async (id: string): Promise<ToolResult[]> => {
    const { messages } = await conversations.getConversation({ conversationId: id });
    return messages.flatMap((m) =>
      m.content.flatMap((b) => (b.block.case === 'toolResult' ? [{ content: b.block.value.content, isError: b.block.value.isError }] : [])),
    );
  };
  const turn = async (id: string, lines: string[]): Promise<ToolResult[]> => {
    const before = (await results(id)).length;
    await conversations.sendMessage({ conversationId: id, text: lines.join('\n') });
    await waitFor(id, [StateKind.IDLE]);
    const got = (await results(id)).slice(before);
    expect(got).toHaveLength(lines.length);
    return got;
  };
  const lastText = async (id: string): Promise<string> => {
    const { messages } = await conversations.getConversation({ conversationId: id });
    const last = messages[messages.length - 1]!;
    return last.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join('\n');
  };
  return {
    bedrock,
    conversations,
    mcp,
    workspace,
    waitFor,
    results,
    turn,
    lastText,
    async close() {
      await bedrock.stop();
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(workspace, { recursive: true, force: true });
    },
  };
}
