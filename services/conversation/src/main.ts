/** Entry point: read the environment, start, stop on SIGTERM/SIGINT. */
import { createLogger, logProcessErrors, onShutdown } from '@bedrock/platform/server';
import { readConversationConfig } from './config.ts';
import { SERVICE_NAME, startConversationService } from './create-conversation-service.ts';

const config = readConversationConfig();
const logger = createLogger({ service: SERVICE_NAME, level: config.logLevel });
logProcessErrors(logger);
const service = await startConversationService(config, { logger });
onShutdown(() => service.stop(), { graceMs: config.shutdownGraceMs, logger });
