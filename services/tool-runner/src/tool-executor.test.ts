import { describe, it, expect, afterAll } from '@jest/globals';
import { readFileSync } from 'node:fs';
import { create } from '@bufbuild/protobuf';
import { Mode, ToolExecJobSchema } from '@bedrock/contracts';
import { createToolExecutor } from './tool-executor.ts';
import { tempDir, testSandboxSettings } from '../test/support.ts';
import { closeSandboxSettings } from './sandbox/sandbox-settings.ts';

const dir = tempDir('bedrock-executor-');
afterAll(() => dir.remove());

describe('ToolExecutor', () => {
  it('answers a job that already finished here from its result instead of running it again', async () => {
    const sandbox = await testSandboxSettings();
    const executor = createToolExecutor({ runnerId: 'r1', context: { sandbox, capture: {} } });
    const job = create(ToolExecJobSchema, {
      toolUseId: 'once',
      conversationId: 'c',
      toolName: 'bash',
      inputJson: JSON.stringify({ command: `echo ran >> ${dir.path}/count; echo done` }),
      cwd: dir.path,
      mode: Mode.UNRESTRICTED,
    });
    const first = await executor.execute(job);
    const again = await executor.execute(job);
    expect(first).toMatchObject({ toolUseId: 'once', content: 'done\n', runnerId: 'r1', exitCode: 0 });
    expect(again).toBe(first);
    expect(readFileSync(`${dir.path}/count`, 'utf8')).toBe('ran\n');
    await closeSandboxSettings(sandbox);
  });
});
