/**
 * For shutdown.test.ts: a process whose shutdown handler behaves as FIXTURE_MODE says
 * (`ok` 50 ms, `slow` 10 s, `hang` forever, `throw`), with a 300 ms grace period (20 s for `slow`).
 */
import { createLogger } from '../logger.ts';
import { onShutdown } from '../shutdown.ts';

const mode = process.env.FIXTURE_MODE ?? 'ok';
const logger = createLogger({ service: 'shutdown-fixture', level: 'info' });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
onShutdown(
  async (signal) => {
    logger.info({ signal }, 'handler started');
    if (mode === 'throw') throw new Error('db close failed');
    await sleep(mode === 'hang' ? 60_000 : mode === 'slow' ? 10_000 : 50);
  },
  { logger, graceMs: mode === 'slow' ? 20_000 : 300 },
);
// Keeps the event loop alive like a server would.
setInterval(() => undefined, 1000);
logger.info('ready');
