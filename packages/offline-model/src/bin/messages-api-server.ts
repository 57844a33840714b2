/**
 * Runs the local Messages API server on its own, answering with the offline demo model:
 * `npm run messages-api -w packages/offline-model` (or `npx tsx packages/offline-model/src/bin/messages-api-server.ts`).
 * Point a gateway at it with ANTHROPIC_BASE_URL=<printed url> and any ANTHROPIC_API_KEY.
 *
 * Environment: MESSAGES_API_PORT (default 4010; 0 = any free port), MESSAGES_API_HOST
 * (default 127.0.0.1), OFFLINE_EVENT_DELAY_MS (delay between streamed events, default 15).
 */
import { offlineModelResponder } from '../offline-model.ts';
import { startMessagesApiServer } from '../server.ts';
import { OFFLINE_SIGNING_KEY } from '../signing.ts';

const port = Number(process.env.MESSAGES_API_PORT ?? 4010);
const host = process.env.MESSAGES_API_HOST ?? '127.0.0.1';
const eventDelayMs = Number(process.env.OFFLINE_EVENT_DELAY_MS ?? 15);
if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`MESSAGES_API_PORT: not a port: ${process.env.MESSAGES_API_PORT}`);
if (!Number.isFinite(eventDelayMs) || eventDelayMs < 0)
  throw new Error(`OFFLINE_EVENT_DELAY_MS: not a delay: ${process.env.OFFLINE_EVENT_DELAY_MS}`);

const server = await startMessagesApiServer({
  host,
  port,
  fallback: offlineModelResponder({ eventDelayMs }),
  keepRequests: 0,
  signingKey: OFFLINE_SIGNING_KEY,
});
// One machine-readable line first, so scripts can read the URL.
console.log(server.url);
console.error(`local Messages API server (offline demo model) listening on ${server.url}`);
for (const signal of ['SIGTERM', 'SIGINT'] as const) {
  process.once(signal, () => void server.close().then(() => process.exit(0)));
}
