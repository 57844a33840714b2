/**
 * What the checkpoint tests share (checkpoints.test.ts, checkpoints-watch.test.ts,
 * ui-rewind.e2e.test.ts): whether this machine can run them (root and btrfs-progs), a
 * CheckpointService client of a user, and one user turn whose model runs one bash tool, played by
 * the test on a System with workspace storage ({@link toolTurn}).
 */
import { describe } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { createClient, type Client } from '@connectrpc/connect';
import { createGrpcTransport } from '@connectrpc/connect-node';
import { CheckpointService, StateKind, StopReason } from '@bedrock/contracts';
import type { System } from './system.ts';

/** `describe` where the machine has root and btrfs-progs (loop-mounted btrfs images), else `describe.skip` with a warning naming `file`. */
export function describeBtrfs(file: string): typeof describe | typeof describe.skip {
  const hasBtrfs = (() => {
    try {
      execFileSync('btrfs', ['--version'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
  if (process.getuid?.() === 0 && hasBtrfs) return describe;
  console.warn(`web-bff ${file}: skipped: needs root and btrfs-progs`);
  return describe.skip;
}

/** web-bff's CheckpointService over gRPC, as the user of `token`. */
export function checkpointClient(s: System, token: string): Client<typeof CheckpointService> {
  return createClient(
    CheckpointService,
    createGrpcTransport({
      baseUrl: s.bff.grpcUrl,
      interceptors: [
        (next) => (req) => {
          req.header.set('authorization', `Bearer ${token}`);
          return next(req);
        },
      ],
    }),
  );
}

/** Runs a shell script in `dir` as the directory's owner, as a tool would. */
export function asOwner(dir: string, script: string): void {
  const uid = execFileSync('stat', ['-c', '%u', dir]).toString().trim();
  execFileSync('setpriv', [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', 'sh', '-c', script], { cwd: dir });
}

/**
 * The turn: the test, as the llm-gateway, asks for the tool; as the tool-runner, makes the tool's
 * file changes in the workspace as its owner; then ends the turn with `answer`. `atTool` runs
 * when the tool job has arrived, before the tool's changes are made (what it answers is returned:
 * e.g. which checkpoints exist by then).
 */
export async function toolTurn<T = void>(
  s: System,
  token: string,
  id: string,
  cwd: string,
  script: string,
  answer: string,
  atTool?: () => T,
): Promise<T | undefined> {
  const client = s.client(token);
  const before = s.llmJobs.filter((j) => j.conversationId === id).length;
  const toolsBefore = s.toolJobs.filter((j) => j.conversationId === id).length;
  await client.sendMessage({ conversationId: id, text: `please: ${script}` });
  const first = await s.waitFor('the LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[before]);
  const toolUseId = `t${before}`;
  await s.send(id, `llm-result/${first.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: first.requestId,
      stopReason: StopReason.TOOL_USE,
      content: [{ block: { case: 'toolUse', value: { id: toolUseId, name: 'bash', inputJson: JSON.stringify({ command: script }) } } }],
    },
  });
  await s.waitFor('the tool job', () => s.toolJobs.filter((j) => j.conversationId === id)[toolsBefore]);
  const seen = atTool?.();
  asOwner(cwd, script);
  await s.send(id, `tool-result/${id}/${toolUseId}`, { case: 'toolComplete', value: { toolUseId, content: 'done', exitCode: 0 } });
  const second = await s.waitFor('the second LLM request', () => s.llmJobs.filter((j) => j.conversationId === id)[before + 1]);
  await s.send(id, `llm-result/${second.requestId}`, {
    case: 'llmResponse',
    value: {
      requestId: second.requestId,
      stopReason: StopReason.END_TURN,
      content: [{ block: { case: 'text', value: { text: answer } } }],
    },
  });
  await s.waitFor('the turn to end', async () => {
    const c = (await client.getConversation({ conversationId: id })).conversation!;
    return c.state?.kind === StateKind.IDLE;
  });
  return seen;
}
