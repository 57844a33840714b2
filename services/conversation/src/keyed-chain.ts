/** Runs work one call at a time per key (a conversation, a user), in call order, within this process. */

export interface KeyedChain<T> {
  /**
   * Runs `work` once every earlier call for `key` has settled; `previous` is what the last of
   * them resolved to (undefined: there was none, or it rejected). Rejects as `work` does.
   */
  run<R extends T>(key: string, work: (previous: T | undefined) => Promise<R>): Promise<R>;
  /** The calls not yet settled, one per key (each resolves, never rejects). */
  pending(): Promise<unknown>[];
}

export function createKeyedChain<T = unknown>(): KeyedChain<T> {
  /** Per key, the last call's outcome; a key leaves the map when its last call has settled. */
  const tails = new Map<string, Promise<T | undefined>>();
  return {
    run(key, work) {
      const before = tails.get(key) ?? Promise.resolve(undefined);
      const mine = before.then(work);
      const tail: Promise<T | undefined> = mine.catch(() => undefined);
      tails.set(key, tail);
      void tail.then(() => {
        if (tails.get(key) === tail) tails.delete(key);
      });
      return mine;
    },
    pending: () => [...tails.values()],
  };
}
