import { getEventListeners } from 'node:events';
import { describe, expect, it } from '@jest/globals';
import { create } from '@bufbuild/protobuf';
import { CancelSignalSchema } from '@bedrock/contracts';
import { createMemoryCancelBus } from './memory/memory-cancel-bus.ts';
import { createRunRegistry, followCancels, RunAbortedError } from './run-registry.ts';
import type { RunContext } from './run-registry.ts';

const key = (id: string, conversationId = 'c1') => ({ id, conversationId });

/** Work that waits for its signal and says how it ended. */
const untilAborted = (run: RunContext): Promise<{ by: unknown; cancelled: boolean }> =>
  new Promise((resolve) =>
    run.signal.addEventListener('abort', () => resolve({ by: (run.signal.reason as RunAbortedError).by, cancelled: run.cancelled })),
  );

describe('createRunRegistry', () => {
  it('joins a run of the same id instead of running it twice, and forgets it when it ends', async () => {
    const runs = createRunRegistry<number>();
    let started = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const work = async (): Promise<number> => {
      started++;
      await gate;
      return started;
    };
    const a = runs.run(key('t1'), work);
    const b = runs.run(key('t1'), work);
    expect(runs.size).toBe(1);
    expect(runs.has('t1')).toBe(true);
    expect(runs.get('t1')).toBe(a);
    release();
    expect(await a).toBe(1);
    expect(await b).toBe(1);
    expect(started).toBe(1);
    expect(runs.size).toBe(0);
    expect(runs.get('t1')).toBeUndefined();
  });

  it('leaves no run behind, whether the work resolves, rejects or throws at once', async () => {
    const runs = createRunRegistry<unknown>();
    const outer = new AbortController();
    await runs.run(key('ok'), async () => 'done', { signal: outer.signal });
    await expect(runs.run(key('bad'), async () => Promise.reject(new Error('boom')), { signal: outer.signal })).rejects.toThrow('boom');
    await expect(
      runs.run(
        key('sync'),
        () => {
          throw new Error('at once');
        },
        { signal: outer.signal },
      ),
    ).rejects.toThrow('at once');
    expect(runs.size).toBe(0);
    for (const id of ['ok', 'bad', 'sync']) expect(runs.has(id)).toBe(false);
    // The listener each run put on the outer signal went with it.
    expect(getEventListeners(outer.signal, 'abort')).toHaveLength(0);
    const held = runs.run(key('held'), untilAborted, { signal: outer.signal });
    expect(getEventListeners(outer.signal, 'abort')).toHaveLength(1);
    runs.cancel('held');
    await held;
    expect(getEventListeners(outer.signal, 'abort')).toHaveLength(0);
    expect(runs.size).toBe(0);
  });

  it('aborts a running run on cancel, as a cancel', async () => {
    const runs = createRunRegistry<{ by: unknown; cancelled: boolean }>();
    const result = runs.run(key('t2'), untilAborted);
    expect(runs.cancel('t2')).toBe(true);
    expect(await result).toEqual({ by: 'cancel', cancelled: true });
    expect(runs.cancelled('t2')).toBe(true);
    expect(runs.size).toBe(0);
  });

  it('remembers a cancel that came before its run, for a while, and every later run of that id starts aborted', async () => {
    let now = 0;
    const runs = createRunRegistry<boolean>({ earlyCancelTtlMs: 1000, now: () => now });
    expect(runs.cancel('early')).toBe(false);
    expect(runs.cancelled('early')).toBe(true);
    expect(await runs.run(key('early'), async (run) => run.signal.aborted && run.cancelled)).toBe(true);
    // A redelivery after the cancel (its result could not be sent) is not run either.
    expect(await runs.run(key('early'), async (run) => run.signal.aborted)).toBe(true);
    now = 1001;
    expect(runs.cancelled('early')).toBe(false);
    expect(await runs.run(key('early'), async (run) => run.signal.aborted)).toBe(false);
    // Nothing is remembered without a cancel.
    expect(await runs.run(key('never'), async (run) => run.signal.aborted)).toBe(false);
  });

  it('bounds the cancels it remembers, forgetting the oldest first', async () => {
    const runs = createRunRegistry<boolean>({ earlyCancelMax: 2 });
    runs.cancel('a');
    runs.cancel('b');
    runs.cancel('c');
    expect(runs.cancelled('a')).toBe(false);
    expect(await runs.run(key('a'), async (run) => run.signal.aborted)).toBe(false);
    expect(await runs.run(key('b'), async (run) => run.signal.aborted)).toBe(true);
    expect(await runs.run(key('c'), async (run) => run.signal.aborted)).toBe(true);
  });

  it('cancels every run of a conversation and none of the others', async () => {
    const runs = createRunRegistry<{ by: unknown; cancelled: boolean } | 'finished'>();
    let finishOther!: () => void;
    const a = runs.run(key('a', 'conv-1'), untilAborted);
    const b = runs.run(key('b', 'conv-1'), untilAborted);
    const other = runs.run(key('c', 'conv-2'), () => new Promise((resolve) => (finishOther = () => resolve('finished'))));
    expect(runs.cancelConversation('conv-1')).toBe(2);
    expect(await a).toEqual({ by: 'cancel', cancelled: true });
    expect(await b).toEqual({ by: 'cancel', cancelled: true });
    expect(runs.size).toBe(1);
    expect(runs.cancelConversation('conv-none')).toBe(0);
    finishOther();
    expect(await other).toBe('finished');
  });

  it('aborts every run on shutdown with the reason given, not as a cancel, and idle() waits for them', async () => {
    const runs = createRunRegistry<{ by: unknown; cancelled: boolean; message: string }>();
    const work = (run: RunContext) =>
      new Promise<{ by: unknown; cancelled: boolean; message: string }>((resolve) =>
        run.signal.addEventListener('abort', () =>
          setTimeout(() => {
            const reason = run.signal.reason as RunAbortedError;
            resolve({ by: reason.by, cancelled: run.cancelled, message: reason.message });
          }, 20),
        ),
      );
    const a = runs.run(key('a'), work);
    const b = runs.run(key('b', 'c2'), work);
    expect(runs.abortAll('gateway shutting down')).toBe(2);
    await runs.idle();
    expect(runs.size).toBe(0);
    expect(await a).toEqual({ by: 'shutdown', cancelled: false, message: 'gateway shutting down' });
    expect(await b).toEqual({ by: 'shutdown', cancelled: false, message: 'gateway shutting down' });
    expect(runs.cancelled('a')).toBe(false);
  });

  it('aborts a run as a shutdown when its own signal aborts, and a cancel first stays a cancel', async () => {
    const runs = createRunRegistry<unknown>();
    const handBack = new AbortController();
    const a = runs.run(key('a'), untilAborted, { signal: handBack.signal });
    handBack.abort();
    expect(await a).toEqual({ by: 'shutdown', cancelled: false });
    // Already aborted: the run starts aborted.
    expect(await runs.run(key('b'), async (run) => [run.signal.aborted, run.cancelled], { signal: handBack.signal })).toEqual([
      true,
      false,
    ]);
    const later = new AbortController();
    const c = runs.run(key('c'), untilAborted, { signal: later.signal });
    runs.cancel('c');
    later.abort();
    expect(await c).toEqual({ by: 'cancel', cancelled: true });
  });

  it('aborts with a RunAbortedError made without a stack', async () => {
    const runs = createRunRegistry<unknown>();
    const reason = runs.run(
      key('s'),
      (run) => new Promise((resolve) => run.signal.addEventListener('abort', () => resolve(run.signal.reason))),
    );
    runs.cancel('s');
    const error = (await reason) as RunAbortedError;
    expect(error).toBeInstanceOf(RunAbortedError);
    expect(error.stack?.split('\n')).toHaveLength(1);
  });
});

describe('followCancels', () => {
  it('cancels the runs a signal names, by id or by conversation, and ignores the other kind of work', async () => {
    const bus = createMemoryCancelBus();
    const runs = createRunRegistry<{ by: unknown; cancelled: boolean }>();
    const heard: Array<[string, number]> = [];
    const unsubscribe = await followCancels(bus, 'toolUseId', runs, (signal, found) =>
      heard.push([`${signal.target.case ?? 'conversation'}:${signal.target.value ?? signal.conversationId}`, found]),
    );
    const byId = runs.run(key('tu-1', 'conv-a'), untilAborted);
    const byConversation = runs.run(key('tu-2', 'conv-b'), untilAborted);
    let other = false;
    const untouched = runs.run(
      key('tu-3', 'conv-c'),
      (run) =>
        new Promise<{ by: unknown; cancelled: boolean }>((resolve) => {
          run.signal.addEventListener('abort', () => (other = true));
          setTimeout(() => resolve({ by: 'none', cancelled: false }), 100);
        }),
    );
    await bus.publish(create(CancelSignalSchema, { conversationId: 'conv-c', target: { case: 'llmRequestId', value: 'tu-3' } }));
    await bus.publish(create(CancelSignalSchema, { conversationId: 'conv-a', target: { case: 'toolUseId', value: 'tu-1' } }));
    await bus.publish(create(CancelSignalSchema, { conversationId: 'conv-b' }));
    await bus.publish(create(CancelSignalSchema, { conversationId: 'conv-x', target: { case: 'toolUseId', value: 'not-yet' } }));
    expect(await byId).toEqual({ by: 'cancel', cancelled: true });
    expect(await byConversation).toEqual({ by: 'cancel', cancelled: true });
    expect(await untouched).toEqual({ by: 'none', cancelled: false });
    expect(other).toBe(false);
    expect(heard).toEqual([
      ['toolUseId:tu-1', 1],
      ['conversation:conv-b', 1],
      ['toolUseId:not-yet', 0],
    ]);
    // The cancel of a run not started here is remembered.
    expect(runs.cancelled('not-yet')).toBe(true);
    await unsubscribe();
    await bus.publish(create(CancelSignalSchema, { conversationId: 'conv-a', target: { case: 'toolUseId', value: 'after' } }));
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(runs.cancelled('after')).toBe(false);
    expect(heard).toHaveLength(3);
    await bus.close();
  });
});
