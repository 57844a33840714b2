/**
 * Every byte the provider sends counts as a sign of life. The SDK drops `ping` events before
 * its caller sees them, so a response that only pings for minutes (a model thinking at length)
 * would look silent to a timer fed by events. This fetch passes each response body through a
 * stream that notes when bytes last arrived; the idle timer asks {@link lastByteAt}.
 */
const lastBytes = new WeakMap<Response, { at: number }>();

export function livenessFetch(inner: typeof fetch = fetch): typeof fetch {
  return async (input, init) => {
    const response = await inner(input, init);
    if (!response.body) return response;
    const mark = { at: performance.now() };
    const body = response.body.pipeThrough(
      new TransformStream<Uint8Array, Uint8Array>({
        transform(chunk, controller) {
          mark.at = performance.now();
          controller.enqueue(chunk);
        },
      }),
    );
    const wrapped = new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
    lastBytes.set(wrapped, mark);
    return wrapped;
  };
}

/** When the response's last bytes arrived (performance.now()), or undefined if not a {@link livenessFetch} response. */
export function lastByteAt(response: Response): number | undefined {
  return lastBytes.get(response)?.at;
}
