/** Entry point: `npx tsx services/llm-gateway/src/main.ts` (environment: docs/llm-gateway.md). */
import { onShutdown } from '@bedrock/platform/server';
import { readLlmGatewayConfig } from './config.ts';
import { createLlmGateway } from './create-llm-gateway.ts';

const config = readLlmGatewayConfig();
const gateway = createLlmGateway(config);
await gateway.start();
onShutdown(() => gateway.stop(), { graceMs: config.shutdownGraceMs + 5_000 });
