/** Entry point: read the environment, start, stop on SIGTERM/SIGINT. */
import { createLogger, logProcessErrors, onShutdown, startTracing } from '@bedrock/platform/server';
import { readConversationConfig } from './config.ts';
import { SERVICE_NAME, startConversationService } from './create-conversation-service.ts';

const config = readConversationConfig();
const logger = createLogger({ service: SERVICE_NAME, level: config.logLevel });
logProcessErrors(logger);
// Spans exported when an OTLP endpoint is set (OTEL_* variables); off otherwise.
const tracing = await startTracing({ serviceName: SERVICE_NAME });
const service = await startConversationService(config, { logger });
onShutdown(() => service.stop().finally(() => tracing.shutdown()), { graceMs: config.shutdownGraceMs, logger });
