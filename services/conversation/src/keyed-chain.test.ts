import { describe, expect, it } from '@jest/globals';
import { createKeyedChain } from './keyed-chain.ts';

const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

describe('createKeyedChain', () => {
  it('runs calls of one key one at a time, in call order, passing the previous outcome', async () => {
    const chain = createKeyedChain<number>();
    const seen: string[] = [];
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const first = chain.run('a', async (previous) => {
      seen.push(`first after ${previous}`);
      await gate;
      return 1;
    });
    const second = chain.run('a', async (previous) => {
      seen.push(`second after ${previous}`);
      return 2;
    });
    const other = chain.run('b', async () => {
      seen.push('other');
      return 3;
    });
    await other;
    expect(seen).toEqual(['first after undefined', 'other']);
    release();
    await expect(Promise.all([first, second])).resolves.toEqual([1, 2]);
    expect(seen).toEqual(['first after undefined', 'other', 'second after 1']);
  });

  it('goes on after a rejection, and forgets a key once its calls have settled', async () => {
    const chain = createKeyedChain<number>();
    const failed = chain.run('a', () => Promise.reject(new Error('boom')));
    const next = chain.run('a', async (previous) => (previous === undefined ? 7 : 0));
    await expect(failed).rejects.toThrow('boom');
    await expect(next).resolves.toBe(7);
    await tick();
    expect(chain.pending()).toHaveLength(0);
  });
});
