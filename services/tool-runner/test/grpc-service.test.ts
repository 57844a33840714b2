/** The ToolRunnerService over a real HTTP/2 socket, driven like an operator or the load generator would. */
import { describe, it, expect, beforeAll, afterAll } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, createClient } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { chownSync, existsSync } from 'node:fs';
import { Mode, QUEUE_TOOL_EXEC, ToolExecJobSchema, ToolRunnerService, health } from '@bedrock/contracts';
import { createMemoryTransport } from '@bedrock/platform';
import { generateToken } from '@bedrock/platform/server';
import { rawReflection } from '@bedrock/testkit/raw-reflection';
import type { ToolCompleteEvent } from '@bedrock/contracts';
import type { ToolRunner } from '../src/create-tool-runner.ts';
import { groupGone, grpcClient, startTestRunner, TEST_SERVICES } from './support-runner.ts';
import { tempDir, testWorkspace } from './support.ts';

let runner: ToolRunner;
const dir = tempDir('bedrock-grpc-');

beforeAll(async () => {
  runner = await startTestRunner();
});
afterAll(async () => {
  await runner.stop();
  dir.remove();
});

function job(toolUseId: string, command: string, mode = Mode.UNRESTRICTED) {
  return create(ToolExecJobSchema, {
    toolUseId,
    conversationId: 'conv-grpc',
    toolName: 'bash',
    inputJson: JSON.stringify({ command }),
    cwd: dir.path,
    mode,
  });
}

describe('ToolRunnerService', () => {
  it('reports its capabilities, sandbox included', async () => {
    const { capabilities } = await grpcClient(runner).getCapabilities({});
    expect(capabilities).toMatchObject({ sandboxAvailable: true, seccompAvailable: true });
    expect(capabilities?.landlockAbi).toBeGreaterThanOrEqual(6);
  });

  it('serves grpc.health.v1 without a service credential', async () => {
    const client = createClient(health.Health, createGrpcTransport({ baseUrl: runner.grpcUrl }));
    expect((await client.check({ service: '' })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
    expect((await client.check({ service: ToolRunnerService.typeName })).status).toBe(health.HealthCheckResponse_ServingStatus.SERVING);
  });

  it('reflection lists only health and reflection, never ToolRunnerService (an internal port)', async () => {
    const { status, answers } = await rawReflection(runner.grpcUrl, [
      { case: 'listServices', value: '' },
      { case: 'fileContainingSymbol', value: ToolRunnerService.typeName },
      { case: 'fileByFilename', value: 'bedrock/internal/v1/tool_runner_service.proto' },
      { case: 'fileContainingSymbol', value: 'bedrock.internal.v1.ToolExecJob' },
    ]);
    expect(status).toBe(0);
    expect(answers[0]!.services).toEqual([
      'grpc.health.v1.Health',
      'grpc.reflection.v1.ServerReflection',
      'grpc.reflection.v1alpha.ServerReflection',
    ]);
    expect(answers.slice(1)).toEqual(Array(3).fill({ errorCode: Code.NotFound }));
  });

  it('streams output, then exactly one result', async () => {
    const chunks: string[] = [];
    const results: ToolCompleteEvent[] = [];
    for await (const msg of grpcClient(runner).executeTool({ job: job('g-1', 'echo first; sleep 0.2; echo second') })) {
      if (msg.kind.case === 'output') chunks.push(msg.kind.value);
      if (msg.kind.case === 'result') results.push(msg.kind.value);
    }
    expect(chunks.join('')).toBe('first\nsecond\n');
    expect(chunks.length).toBeGreaterThanOrEqual(2);
    expect(results).toHaveLength(1);
    expect(results[0]).toMatchObject({
      toolUseId: 'g-1',
      content: 'first\nsecond\n',
      isError: false,
      exitCode: 0,
      cancelled: false,
      runnerId: runner.capabilities().runnerId,
    });
  });

  it("runs a workspace job as its owner's uid in its view, and refuses a uid outside BEDROCK_TOOL_UIDS", async () => {
    const ws = testWorkspace();
    try {
      chownSync(ws.path, 200_202, 200_202);
      const run = async (toolUid: number, id: string) => {
        const tenantJob = create(ToolExecJobSchema, {
          ...job(id, 'id -u; test -e /work && echo HOST-VISIBLE; true', Mode.RESTRICTED),
          cwd: ws.path,
          toolUid,
          toolGid: toolUid,
          workspacePath: ws.path,
        });
        for await (const msg of grpcClient(runner).executeTool({ job: tenantJob })) if (msg.kind.case === 'result') return msg.kind.value;
        return undefined;
      };
      expect(await run(200_202, 'g-t1')).toMatchObject({ isError: false, content: '200202\n' });
      const refused = await run(1000, 'g-t2');
      expect(refused?.isError).toBe(true);
      expect(refused?.content).toContain('BEDROCK_TOOL_UIDS');
    } finally {
      ws.remove();
    }
  });

  it('runs Restricted jobs in the sandbox', async () => {
    let result: ToolCompleteEvent | undefined;
    for await (const msg of grpcClient(runner).executeTool({ job: job('g-2', `touch ${dir.path}/x`, Mode.RESTRICTED) })) {
      if (msg.kind.case === 'result') result = msg.kind.value;
    }
    expect(result?.isError).toBe(true);
    expect(result?.content).toContain('Permission denied');
  });

  it('cancels a running sleep tree: the whole process group is killed and the result says cancelled', async () => {
    const client = grpcClient(runner);
    const stream = client.executeTool({ job: job('g-cancel', 'echo "pgid=$$"; sleep 60 & (sleep 60 & sleep 60) & wait') });
    let pgid = 0;
    let result: ToolCompleteEvent | undefined;
    let cancelledAt = 0;
    for await (const msg of stream) {
      if (msg.kind.case === 'output' && pgid === 0) {
        pgid = Number(/pgid=(\d+)/.exec(msg.kind.value)?.[1]);
        // Let the children and grandchildren start.
        await new Promise((resolve) => setTimeout(resolve, 100));
        cancelledAt = Date.now();
        expect((await client.cancelTool({ toolUseId: 'g-cancel' })).found).toBe(true);
      }
      if (msg.kind.case === 'result') result = msg.kind.value;
    }
    expect(pgid).toBeGreaterThan(0);
    expect(result).toMatchObject({ toolUseId: 'g-cancel', cancelled: true, isError: true });
    expect(await groupGone(pgid)).toBe(true);
    // Generous bound for a loaded CI machine; the benchmark measures the real figure.
    expect(Date.now() - cancelledAt).toBeLessThan(2000);
  });

  it('says when there is nothing to cancel', async () => {
    expect((await grpcClient(runner).cancelTool({ toolUseId: 'not-running' })).found).toBe(false);
  });

  it('rejects a request without a job', async () => {
    await expect(
      (async () => {
        for await (const _ of grpcClient(runner).executeTool({})) {
          // drain
        }
      })(),
    ).rejects.toThrow(/tool_use_id and tool_name is required/);
  });
});

describe('ToolRunnerService: service identity', () => {
  /** Runs `touch <file>` through ExecuteTool presenting `token` (`null`: none); the call's error, if any. */
  async function touch(token: string | null, file: string): Promise<ConnectError | undefined> {
    try {
      for await (const _ of grpcClient(runner, token).executeTool({ job: job(`id-${file}`, `touch ${dir.path}/${file}`) })) {
        // drain
      }
      return undefined;
    } catch (err) {
      return ConnectError.from(err);
    }
  }

  it('refuses ExecuteTool without a credential, and runs nothing', async () => {
    const err = await touch(null, 'no-credential');
    expect(err?.code).toBe(Code.Unauthenticated);
    expect(err?.rawMessage).toMatch(
      /^missing service credential: this is an internal endpoint: present a service token \(BEDROCK_SERVICE_TOKEN_FILE\) listed in BEDROCK_SERVICE_PEERS_FILE/,
    );
    expect(existsSync(`${dir.path}/no-credential`)).toBe(false);
  });

  it('refuses ExecuteTool with a token that is not a peer, and runs nothing', async () => {
    const err = await touch(generateToken(), 'wrong-token');
    expect(err?.code).toBe(Code.Unauthenticated);
    expect(err?.rawMessage).toMatch(/^service token not accepted: /);
    expect(existsSync(`${dir.path}/wrong-token`)).toBe(false);
  });

  it('refuses the other methods without a credential too', async () => {
    await expect(grpcClient(runner, null).getCapabilities({})).rejects.toMatchObject({ code: Code.Unauthenticated });
    await expect(grpcClient(runner, null).cancelTool({ toolUseId: 'x' })).rejects.toMatchObject({ code: Code.Unauthenticated });
  });

  it('runs ExecuteTool for every listed peer', async () => {
    expect(await touch(TEST_SERVICES.tokens.conversation!, 'peer-conversation')).toBeUndefined();
    expect(await touch(TEST_SERVICES.tokens['web-bff']!, 'peer-web-bff')).toBeUndefined();
    expect(existsSync(`${dir.path}/peer-conversation`)).toBe(true);
    expect(existsSync(`${dir.path}/peer-web-bff`)).toBe(true);
  });
});

describe('a runner without a working sandbox', () => {
  let plain: ToolRunner;
  const transport = createMemoryTransport();

  beforeAll(async () => {
    plain = await startTestRunner({ sandbox: { helper: '/nonexistent/bedrock-sandbox' }, runner: { consume: true } }, transport);
  });
  afterAll(async () => {
    await plain.stop();
    await transport.close();
  });

  it('reports no sandbox and never consumes the Restricted queue', async () => {
    expect(plain.capabilities()).toMatchObject({ sandboxAvailable: false, landlockAbi: 0, queues: [QUEUE_TOOL_EXEC] });
    const registered = (await transport.runners.list()).find((r) => r.runnerId === plain.capabilities().runnerId);
    expect(registered?.queues).toEqual([QUEUE_TOOL_EXEC]);
  });

  it('refuses a Restricted job sent to it directly rather than run it unsandboxed', async () => {
    let result: ToolCompleteEvent | undefined;
    for await (const msg of grpcClient(plain).executeTool({ job: job('p-1', `touch ${dir.path}/unsandboxed`, Mode.RESTRICTED) })) {
      if (msg.kind.case === 'result') result = msg.kind.value;
    }
    expect(result?.isError).toBe(true);
    expect(result?.content).toContain('no working kernel sandbox');
    expect(existsSync(`${dir.path}/unsandboxed`)).toBe(false);
  });
});
