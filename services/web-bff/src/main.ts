/** Entry point: read the environment, start, reload tokens on SIGHUP, stop on SIGTERM/SIGINT. */
import { onShutdown } from '@bedrock/platform/server';
import { readWebBffConfig } from './config.ts';
import { startWebBff } from './create-web-bff.ts';

const config = readWebBffConfig();
const bff = await startWebBff(config);
process.on('SIGHUP', () => bff.reloadTokens());
onShutdown(() => bff.stop(), { graceMs: config.shutdownGraceMs + 5000 });
