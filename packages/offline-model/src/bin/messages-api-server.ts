/**
 * Runs the local Messages API server on its own, answering with the offline demo model:
 * `npm run messages-api -w packages/offline-model` (or `npx tsx packages/offline-model/src/bin/messages-api-server.ts`).
 * Point a gateway at it with ANTHROPIC_BASE_URL=<printed url> and any ANTHROPIC_API_KEY (docs/llm-gateway.md,
 * "Running it"). Settings (below): MESSAGES_API_PORT (0 = any free port), MESSAGES_API_HOST, OFFLINE_EVENT_DELAY.
 */
import { duration, loadConfig, port, section, setting, str } from '@bedrock/platform/config';
import { offlineModelResponder } from '../offline-model.ts';
import { startMessagesApiServer } from '../server.ts';
import { OFFLINE_SIGNING_KEY } from '../signing.ts';

const config = loadConfig(
  section({
    port: setting('MESSAGES_API_PORT', port(), { default: 4010, doc: 'Port (0 = any free port).' }),
    host: setting('MESSAGES_API_HOST', str(), { default: '127.0.0.1', doc: 'Interface.' }),
    eventDelay: setting('OFFLINE_EVENT_DELAY', duration(), { default: 15, doc: 'Delay between streamed events.' }),
  }),
);

const server = await startMessagesApiServer({
  host: config.host,
  port: config.port,
  fallback: offlineModelResponder({ eventDelayMs: config.eventDelay }),
  keepRequests: 0,
  signingKey: OFFLINE_SIGNING_KEY,
});
// One machine-readable line first, so scripts can read the URL.
console.log(server.url);
console.error(`local Messages API server (offline demo model) listening on ${server.url}`);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void server.close().then(() => process.exit(0)));
}
