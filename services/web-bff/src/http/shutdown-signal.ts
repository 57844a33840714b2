/**
 * The server's shutdown signal as connect sees it (`shutdownSignal`): connect links every call's
 * context signal to it, so it holds one listener per open call. Node's EventTarget walks its list
 * for a duplicate on every addEventListener, O(n²) over n open calls (docs/web-bff.md, "Scaling");
 * this one keeps its listeners in a Set (O(1) both ways).
 */
type Listener = ((this: AbortSignal, event: Event) => void) | { handleEvent(event: Event): void };

/**
 * What connect uses of an AbortSignal: `aborted`, `reason`, `addEventListener` and
 * `removeEventListener` for 'abort' (listeners are called with the signal as `this`, as
 * connect's own listener expects).
 */
export class ShutdownSignal {
  aborted = false;
  reason: unknown = undefined;
  onabort: null = null;
  private readonly listeners = new Set<Listener>();

  addEventListener(type: string, listener: Listener | null): void {
    if (type === 'abort' && listener) this.listeners.add(listener);
  }

  removeEventListener(type: string, listener: Listener | null): void {
    if (type === 'abort' && listener) this.listeners.delete(listener);
  }

  throwIfAborted(): void {
    if (this.aborted) throw this.reason;
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    const event = new Event('abort');
    for (const listener of [...this.listeners]) {
      if (typeof listener === 'function') listener.call(this as unknown as AbortSignal, event);
      else listener.handleEvent(event);
    }
    this.listeners.clear();
  }

  /** For APIs typed with AbortSignal (connect's `shutdownSignal`). */
  asAbortSignal(): AbortSignal {
    return this as unknown as AbortSignal;
  }
}
