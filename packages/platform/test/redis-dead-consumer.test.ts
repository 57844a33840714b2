/**
 * A consumer killed with SIGKILL while it holds a job (no close, no hand-back): with the
 * shipped lock and stalled-check defaults another consumer gets the job within seconds
 * (docs/transports.md, "Finding dead consumers"). The figure is printed; the assertion is a
 * generous bound, not a speed target.
 */
import { spawn } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { LlmRequestJobSchema } from '@bedrock/contracts';
import { DEFAULT_JOB_LOCK_MS, DEFAULT_JOB_STALLED_INTERVAL_MS, createRedisTransport } from '../src/index.ts';
import { waitFor } from './transport-contract-support.ts';
import { REDIS_URL, deleteKeys, uniquePrefix } from './redis-helpers.ts';

const here = path.dirname(fileURLToPath(import.meta.url));
const prefix = uniquePrefix('dead-consumer');
const transport = createRedisTransport({ redisUrl: REDIS_URL, prefix, onError: () => undefined });

afterAll(async () => {
  await transport.close();
  await deleteKeys(prefix);
});

describe('a consumer that dies holding a job', () => {
  it('loses it to another consumer within lock + 2 stalled checks, on the defaults', async () => {
    const queue = 'dead-consumer';
    const child = spawn(process.execPath, ['--import', 'tsx', path.join(here, 'fixtures', 'hanging-consumer.ts')], {
      cwd: path.resolve(here, '../../..'),
      env: { ...process.env, REDIS_URL, FIXTURE_PREFIX: prefix, FIXTURE_QUEUE: queue },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const lines: string[] = [];
    createInterface({ input: child.stdout }).on('line', (line) => lines.push(line));
    const exited = new Promise((resolve) => child.once('exit', resolve));
    await waitFor(() => lines.includes('ready'), 'the child consumer', 30_000);
    await transport.queues.producer(queue, LlmRequestJobSchema).add('job-1', create(LlmRequestJobSchema, { requestId: 'r-1' }));
    await waitFor(() => lines.includes('taken job-1'), 'the child to take the job');

    child.kill('SIGKILL');
    await exited;
    const killedAt = Date.now();
    let redeliveredAt = 0;
    const survivor = transport.queues.consume(queue, LlmRequestJobSchema, async (job) => {
      if (job.id === 'job-1') redeliveredAt ||= Date.now();
    });
    await waitFor(() => redeliveredAt > 0, 'the job to be redelivered', 30_000);
    await survivor.close(0);
    const seconds = (redeliveredAt - killedAt) / 1000;
    console.log(
      `dead consumer's job redelivered after ${seconds.toFixed(1)} s (lock ${DEFAULT_JOB_LOCK_MS} ms, stalled check every ${DEFAULT_JOB_STALLED_INTERVAL_MS} ms)`,
    );
    expect(seconds * 1000).toBeLessThan(DEFAULT_JOB_LOCK_MS + 2 * DEFAULT_JOB_STALLED_INTERVAL_MS + 2000);
  }, 60_000);
});
