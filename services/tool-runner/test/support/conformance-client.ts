/**
 * The client command given to `conformance client --command` (mcp-conformance.test.ts): Bedrock's
 * own MCP host (createMcpHost, the tool-runner's client for remote servers over Streamable HTTP
 * through confinedFetch) pointed at the conformance suite's test server, whose URL is the last
 * argument; MCP_CONFORMANCE_SCENARIO says what to do. Exits 0 when the host did it without an
 * error, 1 otherwise; the suite's own checks on the server side decide whether the scenario passed.
 */
import { create } from '@bufbuild/protobuf';
import { McpServerSpecSchema } from '@bedrock/contracts';
import { closeSandboxSettings } from '../../src/sandbox/sandbox-settings.ts';
import { createMcpHost, MCP_HOST_DEFAULTS } from '../../src/mcp/host.ts';
import { tempDir, testSandboxSettings } from '../support.ts';

const url = process.argv.at(-1);
/**
 * `initialize` lists the tools (the handshake and tools/list), `tools_call` also calls
 * `add_numbers`, `sse-retry` calls `test_reconnection` (whose stream the server closes before
 * answering).
 */
const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? '';
if (!url || !/^https?:\/\//.test(url)) {
  console.error('usage: conformance-client.ts <server URL> (MCP_CONFORMANCE_SCENARIO names the scenario)');
  process.exit(2);
}

const sandbox = await testSandboxSettings();
const host = createMcpHost({ sandbox, capture: { headBytes: 50_000, tailBytes: 50_000 }, ...MCP_HOST_DEFAULTS });
const dir = tempDir();
const place = { conversationId: 'conformance', mode: 'unrestricted' as const, cwd: dir.path };
const spec = create(McpServerSpecSchema, { name: 'conformance', url });

let failed = false;
try {
  const listing = await host.list(place, [spec]);
  console.log(`tools: ${listing.tools.map((t) => t.name).join(', ') || '(none)'}`);
  if (Object.keys(listing.problems).length > 0) {
    console.error(`listing problems: ${JSON.stringify(listing.problems)}`);
    failed = true;
  }
  const call = async (tool: string, input: Record<string, unknown>) => {
    const name = `mcp__conformance__${tool}`;
    if (!listing.tools.some((t) => t.name === name)) throw new Error(`the server listed no ${name}`);
    const out = await host.call(place, spec, name, input, new AbortController().signal);
    console.log(`call: ${JSON.stringify(out)}`);
    return out;
  };
  if (scenario === 'tools_call') {
    const out = await call('add_numbers', { a: 5, b: 3 });
    if (out.isError || !out.content.includes('8')) failed = true;
  } else if (scenario === 'sse-retry') {
    const out = await call('test_reconnection', {});
    if (out.isError) failed = true;
  } else if (scenario !== 'initialize') {
    throw new Error(`this client does not know the scenario ${JSON.stringify(scenario)}`);
  }
} catch (err) {
  console.error(err);
  failed = true;
} finally {
  await host.close();
  dir.remove();
  await closeSandboxSettings(sandbox);
}
process.exit(failed ? 1 : 0);
