/** Entry point: read the environment, start, reload tokens on SIGHUP, stop on SIGTERM/SIGINT. */
import { createLogger, logProcessErrors, onShutdown, startTracing } from '@bedrock/platform/server';
import { readWebBffConfig } from './config.ts';
import { SERVICE_NAME, createWebBff } from './create-web-bff.ts';

const config = readWebBffConfig();
const logger = createLogger({ service: SERVICE_NAME, level: config.log.level });
logProcessErrors(logger);
// Spans exported when an OTLP endpoint is set (OTEL_* variables); off otherwise.
const tracing = await startTracing({ serviceName: SERVICE_NAME });
const bff = createWebBff(config, { logger });
await bff.start();
process.on('SIGHUP', () => bff.reloadTokens());
onShutdown(() => bff.stop().finally(() => tracing.shutdown()), { graceMs: config.server.shutdownGrace + 5000, logger });
