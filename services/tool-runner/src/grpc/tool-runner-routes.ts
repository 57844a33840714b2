/**
 * The ToolRunnerService: drives this runner directly, without the queues (operators, load
 * tests). ExecuteTool streams live output and ends with exactly one result; a client that
 * goes away cancels its tool.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { ConnectRouter, HandlerContext } from '@connectrpc/connect';
import { CancelToolResponseSchema, ExecuteToolResponseSchema, GetCapabilitiesResponseSchema, ToolRunnerService } from '@bedrock/contracts';
import type { ExecuteToolRequest, ExecuteToolResponse, RunnerCapabilities } from '@bedrock/contracts';
import type { ToolExecutor } from '../tool-executor.ts';
import { serveService } from '@bedrock/platform/server';

export interface ToolRunnerRoutesDeps {
  readonly executor: ToolExecutor;
  readonly capabilities: () => RunnerCapabilities;
}

export function registerToolRunnerService(router: ConnectRouter, deps: ToolRunnerRoutesDeps): void {
  serveService(router, ToolRunnerService, {
    executeTool: (req, ctx) => executeTool(deps.executor, req, ctx),
    cancelTool(req) {
      if (req.toolUseId === '') throw new ConnectError('tool_use_id is required', Code.InvalidArgument);
      return create(CancelToolResponseSchema, { found: deps.executor.cancel(req.toolUseId) });
    },
    getCapabilities() {
      return create(GetCapabilitiesResponseSchema, { capabilities: deps.capabilities() });
    },
  });
}

async function* executeTool(executor: ToolExecutor, req: ExecuteToolRequest, ctx: HandlerContext): AsyncGenerator<ExecuteToolResponse> {
  const job = req.job;
  if (!job || job.toolUseId === '' || job.toolName === '') {
    throw new ConnectError('job with tool_use_id and tool_name is required', Code.InvalidArgument);
  }
  const pending: string[] = [];
  let wake: (() => void) | undefined;
  let done = false;
  const result = executor
    .execute(job, (text) => {
      pending.push(text);
      wake?.();
    })
    .finally(() => {
      done = true;
      wake?.();
    });
  // The caller hung up (or the server is shutting down): nobody will read the result.
  const onAbort = (): void => {
    executor.cancel(job.toolUseId);
  };
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  try {
    for (;;) {
      while (pending.length > 0) {
        // Coalesce what arrived since the last send into one message.
        const text = pending.splice(0).join('');
        yield create(ExecuteToolResponseSchema, { kind: { case: 'output', value: text } });
      }
      if (done) break;
      await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
    yield create(ExecuteToolResponseSchema, { kind: { case: 'result', value: await result } });
  } finally {
    ctx.signal.removeEventListener('abort', onAbort);
  }
}
