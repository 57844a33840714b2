/** Entry point: read the environment, start, stop on SIGTERM/SIGINT. */
import { onShutdown } from '@bedrock/platform/server';
import { readConversationConfig } from './config.ts';
import { startConversationService } from './create-conversation-service.ts';

const config = readConversationConfig();
const service = await startConversationService(config);
onShutdown(() => service.stop(), { graceMs: config.shutdownGraceMs });
