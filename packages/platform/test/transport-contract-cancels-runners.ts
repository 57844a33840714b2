/**
 * The cancel-bus and runner-registry parts of the transport contract: a cancel reaches every
 * subscriber until it unsubscribes; runners are listed until their ttl passes unrefreshed.
 */
import { describe, it, expect, beforeAll } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { CancelSignalSchema, RunnerCapabilitiesSchema } from '@bedrock/contracts';
import type { CancelSignal } from '@bedrock/contracts';
import type { Transport } from '../src/index.ts';
import { unique, waitFor } from './transport-contract-support.ts';
import type { ContractContext } from './transport-contract-support.ts';

export function cancelBusContract({ transport, make }: ContractContext): void {
  describe('cancel bus', () => {
    let t: Transport;
    beforeAll(() => {
      t = transport();
    });

    it('reaches every subscriber until it unsubscribes', async () => {
      const other = await make();
      const gotA: CancelSignal[] = [];
      const gotB: CancelSignal[] = [];
      const unsubscribeA = await t.cancels.subscribe((s) => gotA.push(s));
      const unsubscribeB = await other.cancels.subscribe((s) => gotB.push(s));
      const conv = unique('conv');
      await t.cancels.publish(create(CancelSignalSchema, { conversationId: conv, target: { case: 'toolUseId', value: 'tu-1' } }));
      await waitFor(() => gotA.length === 1 && gotB.length === 1, 'both subscribers');
      expect(gotA[0]!.conversationId).toBe(conv);
      expect(gotB[0]!.target).toEqual({ case: 'toolUseId', value: 'tu-1' });
      await unsubscribeA();
      await other.cancels.publish(create(CancelSignalSchema, { conversationId: conv, target: { case: 'llmRequestId', value: 'r-2' } }));
      await waitFor(() => gotB.length === 2, 'the remaining subscriber');
      expect(gotB[1]!.target).toEqual({ case: 'llmRequestId', value: 'r-2' });
      // Delivered to B, so A (unsubscribed before the publish) would have had it by now.
      expect(gotA).toHaveLength(1);
      await unsubscribeB();
    });
  });
}

export function runnerRegistryContract({ transport }: ContractContext): void {
  describe('runner registry', () => {
    let t: Transport;
    beforeAll(() => {
      t = transport();
    });

    it('lists runners until their ttl passes without a refresh', async () => {
      const short = unique('runner-short');
      const long = unique('runner-long');
      await t.runners.report(
        create(RunnerCapabilitiesSchema, { runnerId: short, sandboxAvailable: true, landlockAbi: 4, queues: ['tool-exec'] }),
        300,
      );
      await t.runners.report(create(RunnerCapabilitiesSchema, { runnerId: long, hostname: 'h1' }), 60_000);
      const ids = async () =>
        (await t.runners.list())
          .map((r) => r.runnerId)
          .filter((id) => id === short || id === long)
          .sort();
      expect(await ids()).toEqual([long, short].sort());
      const listed = (await t.runners.list()).find((r) => r.runnerId === short)!;
      expect(listed).toMatchObject({ sandboxAvailable: true, landlockAbi: 4, queues: ['tool-exec'] });
      await waitFor(async () => (await ids()).length === 1, 'the short-lived runner to expire');
      expect(await ids()).toEqual([long]);
      // A refresh brings a runner back with its new capabilities.
      await t.runners.report(create(RunnerCapabilitiesSchema, { runnerId: short, landlockAbi: 5 }), 60_000);
      expect((await t.runners.list()).find((r) => r.runnerId === short)?.landlockAbi).toBe(5);
      await t.runners.remove(short);
      await t.runners.remove(long);
      expect(await ids()).toEqual([]);
    });
  });
}
