/** Entry point: read the environment, start, reload tokens on SIGHUP, stop on SIGTERM/SIGINT. */
import { createLogger, logProcessErrors, onShutdown } from '@bedrock/platform/server';
import { readWebBffConfig } from './config.ts';
import { SERVICE_NAME, startWebBff } from './create-web-bff.ts';

const config = readWebBffConfig();
const logger = createLogger({ service: SERVICE_NAME, level: config.logLevel });
logProcessErrors(logger);
const bff = await startWebBff(config, { logger });
process.on('SIGHUP', () => bff.reloadTokens());
onShutdown(() => bff.stop(), { graceMs: config.shutdownGraceMs + 5000, logger });
