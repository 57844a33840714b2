/**
 * The behaviour every Transport implementation must have, as one set of Jest cases run against
 * each implementation (in-process and Redis), so the embedded and distributed modes cannot drift
 * apart. This makes the transports the cases (transport-contract-queues/-streams/-cancels-runners.ts) share.
 */
import { describe, beforeAll, afterAll } from '@jest/globals';
import { LlmRequestJobSchema } from '@bedrock/contracts';
import type { LlmRequestJob } from '@bedrock/contracts';
import type { Consumer, Job, Transport } from '../src/index.ts';
import type { ContractContext } from './transport-contract-support.ts';
import { queueContract } from './transport-contract-queues.ts';
import { streamContract } from './transport-contract-streams.ts';
import { cancelBusContract, runnerRegistryContract } from './transport-contract-cancels-runners.ts';

export interface TransportHarness {
  /** A fresh transport; may be called more than once (e.g. a second "replica"). */
  make(): Promise<Transport>;
  /** Called after every transport made is closed (delete keys, ...). */
  cleanup?(): Promise<void>;
}

export function transportContract(name: string, harness: TransportHarness): void {
  describe(`${name} transport contract`, () => {
    const made: Transport[] = [];
    let t: Transport;
    const consumers: Consumer[] = [];

    async function make(): Promise<Transport> {
      const transport = await harness.make();
      made.push(transport);
      return transport;
    }

    /** Closes what a test left open (a failing test must not hang the others). */
    async function closeConsumers(): Promise<void> {
      await Promise.all(consumers.splice(0).map((c) => c.close(0)));
    }

    beforeAll(async () => {
      t = await make();
    });

    afterAll(async () => {
      await closeConsumers();
      await Promise.all(made.map((transport) => transport.close()));
      await harness.cleanup?.();
    });

    function consume(
      transport: Transport,
      queue: string,
      handler: (job: Job<LlmRequestJob>, signal: AbortSignal) => Promise<void>,
      options?: Parameters<Transport['queues']['consume']>[3],
    ): Consumer {
      const consumer = transport.queues.consume(queue, LlmRequestJobSchema, handler, options);
      consumers.push(consumer);
      return consumer;
    }

    const context: ContractContext = { transport: () => t, make, consume, closeConsumers };
    queueContract(context);
    streamContract(context);
    cancelBusContract(context);
    runnerRegistryContract(context);
  });
}
