/** Entry point: `npx tsx services/llm-gateway/src/main.ts` (environment: docs/llm-gateway.md). */
import { createLogger, logProcessErrors, onShutdown, startTracing } from '@bedrock/platform/server';
import { readLlmGatewayConfig } from './config.ts';
import { createLlmGateway } from './create-llm-gateway.ts';

const config = readLlmGatewayConfig();
const logger = createLogger({ service: 'llm-gateway', level: config.log.level });
logProcessErrors(logger);
// Spans exported when an OTLP endpoint is set (OTEL_* variables); off otherwise.
const tracing = await startTracing({ serviceName: 'llm-gateway' });
const gateway = createLlmGateway(config, { logger });
await gateway.start();
onShutdown(() => gateway.stop().finally(() => tracing.shutdown()), { graceMs: config.server.shutdownGrace + 5_000, logger });
