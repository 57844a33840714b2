/**
 * The notification-stream part of the transport contract: durable and ephemeral appends,
 * reads that resume, block, abort and time out, follows of many streams, and deletion.
 */
import { describe, it, expect, beforeAll } from '@jest/globals';
import { toJsonString } from '@bufbuild/protobuf';
import { ConversationEventSchema } from '@bedrock/contracts';
import { STREAM_START } from '../src/index.ts';
import type { StreamPosition, Transport } from '../src/index.ts';
import { delta, durable, positions, unique, waitFor } from './transport-contract-support.ts';
import type { ContractContext } from './transport-contract-support.ts';

export function streamContract({ transport }: ContractContext): void {
  describe('notification streams', () => {
    let t: Transport;
    beforeAll(() => {
      t = transport();
    });

    it('appends durable events once, in sequence order', async () => {
      const conv = unique('conv');
      expect(await t.streams.last(conv)).toEqual(STREAM_START);
      for (const seq of [1n, 2n, 3n]) expect(await t.streams.appendDurable(durable(conv, seq))).toBe(true);
      expect(await t.streams.appendDurable(durable(conv, 2n))).toBe(false);
      expect(await t.streams.appendDurable(durable(conv, 3n))).toBe(false);
      expect(await t.streams.appendDurable(durable(conv, 0n))).toBe(false);
      const events = await t.streams.read(conv, STREAM_START);
      expect(positions(events)).toEqual(['1-0', '2-0', '3-0']);
      expect(events[2]!.kind).toEqual({ case: 'contextExhausted', value: expect.objectContaining({ summary: 'summary 3' }) });
      expect(events[0]!.conversationId).toBe(conv);
      expect(await t.streams.last(conv)).toEqual({ sequence: 3n, deltaIndex: 0 });
    });

    it('appends many durable events of one conversation in order, each like appendDurable', async () => {
      const conv = unique('conv');
      expect(await t.streams.appendDurableMany([])).toEqual([]);
      expect(await t.streams.appendDurableMany([durable(conv, 1n), durable(conv, 2n), durable(conv, 3n)])).toEqual([true, true, true]);
      // Taken positions, one behind, sequence 0, a repeat within the call, then new ones.
      expect(await t.streams.appendEphemeral(delta(conv, 3n, 'd'))).toEqual({ sequence: 3n, deltaIndex: 1 });
      expect(
        await t.streams.appendDurableMany([
          durable(conv, 2n),
          durable(conv, 3n),
          durable(conv, 0n),
          durable(conv, 5n),
          durable(conv, 5n),
          durable(conv, 4n),
          durable(conv, 6n),
        ]),
      ).toEqual([false, false, false, true, false, false, true]);
      const events = await t.streams.read(conv, STREAM_START);
      expect(positions(events)).toEqual(['1-0', '2-0', '3-0', '3-1', '5-0', '6-0']);
      expect(events[4]!.kind).toEqual({ case: 'contextExhausted', value: expect.objectContaining({ summary: 'summary 5' }) });
      expect(events[4]!.conversationId).toBe(conv);
      expect(await t.streams.last(conv)).toEqual({ sequence: 6n, deltaIndex: 0 });
      // Deltas go after the last durable event of the batch.
      expect(await t.streams.appendEphemeral(delta(conv, 6n, 'e'))).toEqual({ sequence: 6n, deltaIndex: 1 });
      // All re-published: nothing changes.
      expect(await t.streams.appendDurableMany([durable(conv, 1n), durable(conv, 6n)])).toEqual([false, false]);
      expect(await t.streams.last(conv)).toEqual({ sequence: 6n, deltaIndex: 1 });
      // A blocked reader is woken by a batch.
      const reading = t.streams.read(conv, { sequence: 6n, deltaIndex: 1 }, { blockMs: 20_000 });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await t.streams.appendDurableMany([durable(conv, 7n), durable(conv, 8n)])).toEqual([true, true]);
      const woken = positions(await reading);
      expect(woken[0]).toBe('7-0');
      // One conversation per call: a mixed batch is refused and appends nothing.
      await expect(t.streams.appendDurableMany([durable(conv, 9n), durable(unique('other'), 1n)])).rejects.toThrow(/one call/);
      expect(await t.streams.last(conv)).toEqual({ sequence: 8n, deltaIndex: 0 });
    });

    it('appends events given already encoded exactly as decoded ones', async () => {
      const conv = unique('conv');
      const encoded = (sequence: bigint) => {
        const event = durable(conv, sequence);
        return { conversationId: conv, sequence, kind: event.kind.case!, json: toJsonString(ConversationEventSchema, event) };
      };
      expect(await t.streams.appendDurableMany([encoded(1n), durable(conv, 2n), encoded(3n)])).toEqual([true, true, true]);
      expect(await t.streams.appendDurableMany([encoded(2n)])).toEqual([false]);
      const events = await t.streams.read(conv, STREAM_START);
      expect(positions(events)).toEqual(['1-0', '2-0', '3-0']);
      expect(events[2]).toEqual(durable(conv, 3n));
    });

    it('follows many streams live, each in order from its position, until stopped', async () => {
      const convs = Array.from({ length: 6 }, () => unique('conv'));
      await t.streams.appendDurable(durable(convs[0]!, 1n));
      const got = new Map<string, string[]>(convs.map((c) => [c, []]));
      // Conversation 0 from its start (catches up on 1-0), the others from now.
      const follows = convs.map((c) => t.streams.follow(c, STREAM_START, (events) => got.get(c)!.push(...positions(events))));
      // A second follow of one stream, from a later position, gets only what comes after it.
      const late: string[] = [];
      const second = t.streams.follow(convs[0]!, { sequence: 1n, deltaIndex: 0 }, (events) => late.push(...positions(events)));
      await waitFor(() => got.get(convs[0]!)!.length === 1, 'catch-up');
      for (const [i, c] of convs.entries()) {
        await t.streams.appendDurable(durable(c, i === 0 ? 2n : 1n));
        await t.streams.appendEphemeral(delta(c, i === 0 ? 2n : 1n, 'x'));
      }
      await waitFor(() => convs.every((c) => got.get(c)!.length >= (c === convs[0] ? 3 : 2)), 'live events');
      expect(got.get(convs[0]!)).toEqual(['1-0', '2-0', '2-1']);
      for (const c of convs.slice(1)) expect(got.get(c)).toEqual(['1-0', '1-1']);
      expect(late).toEqual(['2-0', '2-1']);
      // Stopped: nothing more arrives; a follow added later (after blocking reads began) is served at once.
      follows[1]!.stop();
      const added = unique('conv');
      const addedGot: string[] = [];
      const addedFollow = t.streams.follow(added, STREAM_START, (events) => addedGot.push(...positions(events)));
      await new Promise((resolve) => setTimeout(resolve, 50));
      const startedAt = Date.now();
      await t.streams.appendDurable(durable(added, 1n));
      await t.streams.appendDurable(durable(convs[1]!, 2n));
      await waitFor(() => addedGot.length === 1, 'added follow');
      expect(Date.now() - startedAt).toBeLessThan(5000);
      await new Promise((resolve) => setTimeout(resolve, 100));
      expect(got.get(convs[1]!)).toEqual(['1-0', '1-1']);
      for (const f of [...follows, second, addedFollow]) f.stop();
    });

    it('numbers ephemeral events after the last durable one and drops stale ones', async () => {
      const conv = unique('conv');
      expect(await t.streams.appendEphemeral(delta(conv, 0n, 'before anything'))).toEqual({ sequence: 0n, deltaIndex: 1 });
      expect(await t.streams.appendDurable(durable(conv, 1n))).toBe(true);
      expect(await t.streams.appendEphemeral(delta(conv, 1n, 'a'))).toEqual({ sequence: 1n, deltaIndex: 1 });
      expect(await t.streams.appendEphemeral(delta(conv, 1n, 'b'))).toEqual({ sequence: 1n, deltaIndex: 2 });
      // A durable event at a position the deltas already passed is a re-publish.
      expect(await t.streams.appendDurable(durable(conv, 1n))).toBe(false);
      expect(await t.streams.appendDurable(durable(conv, 2n))).toBe(true);
      // Stale: a later durable event exists.
      expect(await t.streams.appendEphemeral(delta(conv, 1n, 'late'))).toBeNull();
      // Ahead: durable event 5 is not in the stream yet.
      expect(await t.streams.appendEphemeral(delta(conv, 5n, 'early'))).toBeNull();
      expect(await t.streams.appendEphemeral(delta(conv, 2n, 'c'))).toEqual({ sequence: 2n, deltaIndex: 1 });
      const events = await t.streams.read(conv, STREAM_START);
      expect(positions(events)).toEqual(['0-1', '1-0', '1-1', '1-2', '2-0', '2-1']);
      const texts = events.filter((e) => e.kind.case === 'tokenDelta').map((e) => (e.kind.value as { text: string }).text);
      expect(texts).toEqual(['before anything', 'a', 'b', 'c']);
      expect(await t.streams.last(conv)).toEqual({ sequence: 2n, deltaIndex: 1 });
    });

    it('resumes after any position with no gap and no duplicate', async () => {
      const conv = unique('conv');
      for (let seq = 1n; seq <= 5n; seq++) {
        await t.streams.appendDurable(durable(conv, seq));
        for (let i = 0; i < Number(seq % 3n); i++) await t.streams.appendEphemeral(delta(conv, seq, `${seq}.${i}`));
      }
      const all = positions(await t.streams.read(conv, STREAM_START));
      expect(all).toEqual(['1-0', '1-1', '2-0', '2-1', '2-2', '3-0', '4-0', '4-1', '5-0', '5-1', '5-2']);
      // Page through with a small limit, resuming from the last position seen each time.
      const paged: string[] = [];
      let after: StreamPosition = STREAM_START;
      for (;;) {
        const page = await t.streams.read(conv, after, { limit: 2 });
        if (page.length === 0) break;
        expect(page.length).toBeLessThanOrEqual(2);
        paged.push(...positions(page));
        const lastEvent = page[page.length - 1]!;
        after = { sequence: lastEvent.sequence, deltaIndex: lastEvent.deltaIndex };
      }
      expect(paged).toEqual(all);
      expect(positions(await t.streams.read(conv, { sequence: 2n, deltaIndex: 1 }))).toEqual(all.slice(4));
      expect(positions(await t.streams.read(conv, { sequence: 3n, deltaIndex: 0 }))).toEqual(all.slice(6));
      expect(await t.streams.read(conv, { sequence: 5n, deltaIndex: 2 })).toEqual([]);
    });

    it('a blocking read is woken by an append', async () => {
      const conv = unique('conv');
      await t.streams.appendDurable(durable(conv, 1n));
      const startedAt = Date.now();
      const reading = t.streams.read(conv, { sequence: 1n, deltaIndex: 0 }, { blockMs: 20_000 });
      // Give the read a moment to block; the append must wake it whether it arrives before or after.
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await t.streams.appendEphemeral(delta(conv, 1n, 'wake'))).toEqual({ sequence: 1n, deltaIndex: 1 });
      const events = await reading;
      expect(positions(events)).toEqual(['1-1']);
      expect(Date.now() - startedAt).toBeLessThan(10_000);
    });

    it('a blocking read resolves with [] on abort, and at once when already aborted', async () => {
      const conv = unique('conv');
      const controller = new AbortController();
      const startedAt = Date.now();
      const reading = t.streams.read(conv, STREAM_START, { blockMs: 20_000, signal: controller.signal });
      await new Promise((resolve) => setTimeout(resolve, 50));
      controller.abort();
      expect(await reading).toEqual([]);
      expect(Date.now() - startedAt).toBeLessThan(10_000);
      // The stream still works after an aborted read.
      await t.streams.appendDurable(durable(conv, 1n));
      expect(await t.streams.read(conv, STREAM_START, { signal: controller.signal })).toEqual([]);
      expect(positions(await t.streams.read(conv, STREAM_START, { blockMs: 1000 }))).toEqual(['1-0']);
    });

    it('a blocking read times out with []', async () => {
      const conv = unique('conv');
      const startedAt = Date.now();
      expect(await t.streams.read(conv, STREAM_START, { blockMs: 100 })).toEqual([]);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(90);
    });

    it('deletes a stream: nothing left to read, last is the start, appends begin anew', async () => {
      const conv = unique('conv');
      const other = unique('conv');
      await t.streams.appendDurableMany([durable(conv, 1n), durable(conv, 2n)]);
      await t.streams.appendEphemeral(delta(conv, 2n, 'd'));
      await t.streams.appendDurable(durable(other, 1n));
      await t.streams.delete(conv);
      await t.streams.delete(unique('never-created'));
      expect(await t.streams.read(conv, STREAM_START)).toEqual([]);
      expect(await t.streams.last(conv)).toEqual(STREAM_START);
      // Another conversation's stream is untouched.
      expect(positions(await t.streams.read(other, STREAM_START))).toEqual(['1-0']);
      // Appending again starts a new stream, at any sequence (the old top is forgotten).
      expect(await t.streams.appendDurable(durable(conv, 1n))).toBe(true);
      expect(await t.streams.appendEphemeral(delta(conv, 1n, 'again'))).toEqual({ sequence: 1n, deltaIndex: 1 });
      expect(await t.streams.appendDurable(durable(conv, 3n))).toBe(true);
      expect(positions(await t.streams.read(conv, STREAM_START))).toEqual(['1-0', '1-1', '3-0']);
    });

    it('many blocking reads at once are all woken', async () => {
      const conv = unique('conv');
      const reads = Array.from({ length: 12 }, () => t.streams.read(conv, STREAM_START, { blockMs: 20_000 }));
      await new Promise((resolve) => setTimeout(resolve, 50));
      await t.streams.appendDurable(durable(conv, 1n));
      for (const events of await Promise.all(reads)) expect(positions(events)).toEqual(['1-0']);
    });
  });
}
