/**
 * The embedded product for the MCP benchmarks (offline model, real sandbox, the servers given
 * as BEDROCK_MCP_SERVERS), a workspace owned by the tool user, a client, and the watch stream
 * of a conversation with the arrival time of each event.
 */
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import type { StateKind } from '@bedrock/contracts';
import { ConversationService, McpService, type WatchConversationResponse } from '@bedrock/contracts';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

const repo = new URL('../../../', import.meta.url).pathname;
export const EVERYTHING = join(repo, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
export const FIXTURE = join(repo, 'services/tool-runner/test/fixtures/mcp-fixture-server.mjs');

export interface Bench {
  readonly bedrock: RunningEmbedded;
  readonly conversations: Client<typeof ConversationService>;
  readonly mcp: Client<typeof McpService>;
  readonly workspace: string;
  stateOf(id: string): Promise<StateKind | undefined>;
  close(): Promise<void>;
}

export async function startBench(label: string, servers: Record<string, unknown>): Promise<Bench> {
  const dataDir = mkdtempSync(join(tmpdir(), `bedrock-${label}-data-`));
  const workspace = mkdtempSync(join(tmpdir(), `bedrock-${label}-ws-`));
  if (process.getuid?.() === 0) chownSync(workspace, 65534, 65534);
  const bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      BEDROCK_MCP_SERVERS: JSON.stringify(servers),
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
  return {
    bedrock,
    conversations,
    mcp: createClient(McpService, transport),
    workspace,
    stateOf: async (id) => (await conversations.getConversation({ conversationId: id })).conversation?.state?.kind,
    async close() {
      await bedrock.stop();
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(workspace, { recursive: true, force: true });
    },
  };
}

/** A conversation's watch stream: its live output, and when a tool_result arrived. */
export function watch(b: Bench, id: string) {
  const events: { at: number; event: WatchConversationResponse }[] = [];
  const abort = new AbortController();
  void (async () => {
    try {
      for await (const event of b.conversations.watchConversation({ conversationId: id }, { signal: abort.signal }))
        events.push({ at: performance.now(), event });
    } catch {
      // stopped
    }
  })();
  return {
    output: () => events.flatMap(({ event }) => (event.event?.kind.case === 'toolOutput' ? [event.event.kind.value.text] : [])).join(''),
    resultAt: (after: number) =>
      events.find(
        ({ at, event }) =>
          at >= after &&
          event.event?.kind.case === 'messagePersisted' &&
          event.event.kind.value.message?.content.some((block) => block.block.case === 'toolResult'),
      )?.at,
    stop: () => abort.abort(),
  };
}

export async function until(what: string, probe: () => boolean | Promise<boolean>, timeoutMs: number, everyMs = 10): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
