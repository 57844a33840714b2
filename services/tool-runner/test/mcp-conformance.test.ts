/**
 * The MCP conformance suite (@modelcontextprotocol/conformance, npm) against Bedrock's MCP client:
 * for each scenario below the suite starts its own test server and runs
 * test/support/conformance-client.ts, which drives the tool-runner's real host at that server's
 * URL. A scenario passes only when the CLI exits 0 and reports every check passed. Which scenarios
 * are not run and why: docs/mcp.md, "The MCP conformance suite".
 */
import { describe, it, expect } from '@jest/globals';
import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

const root = new URL('../../..', import.meta.url).pathname;
const cli = join(dirname(createRequire(import.meta.url).resolve('@modelcontextprotocol/conformance/package.json')), 'dist/index.js');
const node20 = new URL('support/conformance-node20.mjs', import.meta.url).pathname;
const client = new URL('support/conformance-client.ts', import.meta.url).pathname;

/**
 * Runs the suite's CLI for one scenario (under support/conformance-node20.mjs) with our client as
 * its command: the host is createMcpHost, over Streamable HTTP through confinedFetch. The suite's
 * checks decide.
 */
function runScenario(scenario: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [
        '--import',
        node20,
        cli,
        'client',
        '--scenario',
        scenario,
        '--timeout',
        '60000',
        '--command',
        `${process.execPath} --import tsx ${client}`,
      ],
      { cwd: root, env: { ...process.env, NO_COLOR: '1' }, maxBuffer: 16 * 1024 * 1024 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, output: `${stdout}\n${stderr}` }),
    );
  });
}

describe('the MCP conformance suite against the tool-runner host', () => {
  for (const scenario of ['initialize', 'tools_call', 'sse-retry']) {
    it(`passes ${scenario}`, async () => {
      const { code, output } = await runScenario(scenario);
      if (code !== 0 || !/OVERALL: PASSED/.test(output)) throw new Error(`conformance ${scenario} failed (exit ${code}):\n${output}`);
      expect(output).toMatch(/Passed: (\d+)\/\1, 0 failed/);
    }, 120_000);
  }
});
