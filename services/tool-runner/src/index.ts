export { createToolRunner } from './create-tool-runner.ts';
export type { ToolRunner, ToolRunnerDeps } from './create-tool-runner.ts';
export { readToolRunnerConfig, toolRunnerConfigSchema } from './config.ts';
export type { ToolRunnerConfig } from './config.ts';
export { toolResultEventId } from './queue/tool-exec-worker.ts';
