/** Entry point: read the environment, start, stop on SIGTERM/SIGINT. */
import { createLogger, logProcessErrors, onShutdown, startTracing } from '@bedrock/platform/server';
import { readConversationConfig } from './config.ts';
import { SERVICE_NAME, createConversationService } from './create-conversation-service.ts';

const config = readConversationConfig();
const logger = createLogger({ service: SERVICE_NAME, level: config.log.level });
logProcessErrors(logger);
// Spans exported when an OTLP endpoint is set (OTEL_* variables); off otherwise.
const tracing = await startTracing({ serviceName: SERVICE_NAME });
const service = createConversationService(config, { logger });
await service.start();
onShutdown(() => service.stop().finally(() => tracing.shutdown()), { graceMs: config.server.shutdownGrace, logger });
