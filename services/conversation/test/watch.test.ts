/**
 * WatchConversation (REQ-BED-011): a snapshot, then the live stream in order — durable events
 * with consecutive sequences, token deltas and tool output between them — and a resume from
 * any (sequence, delta_index) continues with no gap and no duplicate.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { ConversationEventSchema, StateKind, StopReason, type ConversationEvent } from '@bedrock/contracts';
import type { MessageInitShape } from '@bufbuild/protobuf';
import { text, toolUse } from './support/blocks.ts';
import { startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'watch' });
});
afterAll(async () => {
  await h?.close();
});

interface Watch {
  readonly events: ConversationEvent[];
  /** Resolves when an event satisfying `predicate` has arrived. */
  until(what: string, predicate: (e: ConversationEvent) => boolean): Promise<void>;
  stop(): Promise<void>;
}

function watch(conversationId: string, afterSequence = 0n, afterDeltaIndex = 0): Watch {
  const abort = new AbortController();
  const events: ConversationEvent[] = [];
  const done = (async () => {
    try {
      for await (const res of h.client().watchConversation({ conversationId, afterSequence, afterDeltaIndex }, { signal: abort.signal })) {
        if (res.event!.kind.case !== 'heartbeat') events.push(res.event!);
      }
    } catch (err) {
      if (!abort.signal.aborted) throw err;
    }
  })();
  return {
    events,
    async until(what, predicate) {
      await h.waitFor(what, () => events.some(predicate));
    },
    async stop() {
      abort.abort();
      await done;
    },
  };
}

const position = (e: ConversationEvent) => `${e.sequence}.${e.deltaIndex}`;
const isIdle = (e: ConversationEvent) => e.kind.case === 'stateChanged' && e.kind.value.state!.kind === StateKind.IDLE;

/** Appends what the gateway or runner streams: ephemeral events after durable event `sequence`. */
async function ephemeral(id: string, sequence: bigint, kinds: MessageInitShape<typeof ConversationEventSchema>['kind'][]) {
  for (const kind of kinds) {
    const at = await h.transport.streams.appendEphemeral(create(ConversationEventSchema, { conversationId: id, sequence, kind }));
    expect(at).not.toBeNull();
  }
}

describe('WatchConversation', () => {
  it('sends a snapshot, then every live event in order; a resume from any position has no gap and no duplicate', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'first' });
    const first = await h.llmJob(id);
    await h.respond(first, { content: [text('first answer')] });
    await h.waitState(id, StateKind.IDLE);
    await h.waitFor('published', async () => !(await h.service.store.hasUnsentOutbox(id)));

    const live = watch(id);
    await live.until('snapshot', (e) => e.kind.case === 'snapshot');
    const snapshot = live.events[0]!;
    expect(snapshot.kind.case).toBe('snapshot');
    const snap = snapshot.kind.case === 'snapshot' ? snapshot.kind.value : null;
    expect(snap!.messages).toHaveLength(2);
    expect(snap!.conversation!.state!.kind).toBe(StateKind.IDLE);
    expect(snapshot.sequence).toBe((await h.get(id)).sequence);

    // A turn with streamed text, a tool with live output, and the answer.
    await h.client().sendMessage({ conversationId: id, text: 'second' });
    const second = await h.llmJob(id, 1);
    await ephemeral(id, second.notifySequence, [
      { case: 'tokenDelta', value: { requestId: second.requestId, text: 'Let me ' } },
      { case: 'tokenDelta', value: { requestId: second.requestId, text: 'check.' } },
    ]);
    await h.respond(second, {
      stopReason: StopReason.TOOL_USE,
      content: [text('Let me check.'), toolUse('t1', 'bash', { command: 'ls' })],
    });
    const tool = await h.toolJob(id, 't1');
    await ephemeral(id, tool.notifySequence, [
      { case: 'toolOutput', value: { toolUseId: 't1', text: 'a\n' } },
      { case: 'toolOutput', value: { toolUseId: 't1', text: 'b\n' } },
    ]);
    await h.complete(tool, { content: 'a\nb\n' });
    await h.respond(await h.llmJob(id, 2), { content: [text('Two files.')] });
    await live.until('idle again', isIdle);
    await live.stop();

    const events = live.events.slice(1);
    // Exactly what the stream holds after the snapshot, in order.
    const stored = (await h.notifications(id)).filter((e) => e.sequence > snapshot.sequence);
    expect(events.map(position)).toEqual(stored.map(position));
    expect(events).toEqual(stored);
    const durable = events.filter((e) => e.deltaIndex === 0);
    expect(durable.map((e) => e.sequence)).toEqual(durable.map((_, i) => snapshot.sequence + BigInt(i + 1)));
    expect(events.filter((e) => e.deltaIndex > 0).map((e) => e.kind.case)).toEqual([
      'tokenDelta',
      'tokenDelta',
      'toolOutput',
      'toolOutput',
    ]);
    const persisted = events.flatMap((e) => (e.kind.case === 'messagePersisted' ? [e.kind.value.message!.sequence] : []));
    expect(persisted).toEqual([3n, 4n, 5n, 6n]);

    // Resume from every position seen: the rest, exactly.
    for (const [i, at] of events.entries()) {
      if (i % 2 === 1 && at.deltaIndex === 0) continue; // every ephemeral position, every other durable one
      const resumed = watch(id, at.sequence, at.deltaIndex);
      const rest = events.slice(i + 1);
      if (rest.length) await resumed.until(`events after ${position(at)}`, (e) => position(e) === position(rest.at(-1)!));
      await resumed.stop();
      expect(resumed.events.map(position)).toEqual(rest.map(position));
    }
  });

  it('resumes live: events committed after the resume point arrive once, in order', async () => {
    const id = await h.createConversation();
    await h.client().sendMessage({ conversationId: id, text: 'go' });
    const job = await h.llmJob(id);
    await h.waitFor('published', async () => !(await h.service.store.hasUnsentOutbox(id)));
    const { sequence } = await h.get(id);
    const a = watch(id, sequence, 0);
    const b = watch(id, sequence, 0);
    await h.respond(job, { stopReason: StopReason.TOOL_USE, content: [toolUse('t1', 'think', { thoughts: 'x' })] });
    await h.complete(await h.toolJob(id, 't1'), { content: 'ok' });
    await h.respond(await h.llmJob(id, 1), { content: [text('done')] });
    await a.until('idle', isIdle);
    await b.until('idle', isIdle);
    await Promise.all([a.stop(), b.stop()]);
    expect(a.events[0]!.sequence).toBe(sequence + 1n);
    expect(a.events.map(position)).toEqual(a.events.map((_, i) => `${sequence + BigInt(i + 1)}.0`));
    expect(b.events).toEqual(a.events);
  });
});
