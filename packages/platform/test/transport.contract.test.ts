/**
 * Runs the transport contract against the in-process transport (one shared instance, as
 * every service of the embedded process shares it).
 */
import { createMemoryTransport } from '../src/index.ts';
import type { Transport } from '../src/index.ts';
import { transportContract } from './transport-contract.ts';

let memory: Transport | undefined;
transportContract('in-process', {
  async make() {
    memory ??= createMemoryTransport();
    return memory;
  },
});
