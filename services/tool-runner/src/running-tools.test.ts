import { describe, it, expect } from '@jest/globals';
import { RunningTools } from './running-tools.ts';

describe('RunningTools', () => {
  it('joins a redelivered job instead of running it twice', async () => {
    const running = new RunningTools<number>();
    let runs = 0;
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const work = async (): Promise<number> => {
      runs++;
      await gate;
      return runs;
    };
    const a = running.run('t1', work);
    const b = running.run('t1', work);
    expect(running.size).toBe(1);
    release();
    expect(await a).toBe(1);
    expect(await b).toBe(1);
    expect(runs).toBe(1);
    expect(running.size).toBe(0);
  });

  it('aborts the running work on cancel', async () => {
    const running = new RunningTools<string>();
    const result = running.run('t2', (signal) => new Promise((resolve) => signal.addEventListener('abort', () => resolve('aborted'))));
    expect(running.cancel('t2')).toBe(true);
    expect(await result).toBe('aborted');
  });

  it('remembers a cancel that came before its job, for a while', async () => {
    let now = 0;
    const running = new RunningTools<boolean>({ earlyCancelTtlMs: 1000, now: () => now });
    expect(running.cancel('early')).toBe(false);
    expect(await running.run('early', async (signal) => signal.aborted)).toBe(true);
    // Consumed: a second delivery is not cancelled.
    expect(await running.run('early', async (signal) => signal.aborted)).toBe(false);
    running.cancel('late');
    now = 2000;
    expect(await running.run('late', async (signal) => signal.aborted)).toBe(false);
  });

  it('bounds the early cancels it remembers', async () => {
    const running = new RunningTools<boolean>({ earlyCancelMax: 2 });
    running.cancel('a');
    running.cancel('b');
    running.cancel('c');
    expect(await running.run('a', async (signal) => signal.aborted)).toBe(false);
    expect(await running.run('c', async (signal) => signal.aborted)).toBe(true);
  });
});
