/** For process-errors.test.ts: a process that fails as FIXTURE_MODE says (`throw`, `reject`) after logging through logProcessErrors. */
import { createLogger } from '../logger.ts';
import { logProcessErrors } from '../process-errors.ts';

const logger = createLogger({ service: 'errors-fixture', level: 'info' });
logProcessErrors(logger);
setTimeout(() => {
  if (process.env.FIXTURE_MODE === 'reject') void Promise.reject(new Error('lost promise'));
  else throw new Error('boom in a callback');
}, 10);
setInterval(() => undefined, 1000);
