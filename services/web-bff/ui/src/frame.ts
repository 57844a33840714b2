/**
 * Runs `draw` once per animation frame however often `request` is called between frames: a
 * fast stream brings hundreds of deltas a second, and each drawn once would stall the page. A
 * page in the background gets no frames, so a timer draws there (after `fallbackMs`).
 */
export function perFrame(draw: () => void, fallbackMs = 200): { request(): void; cancel(): void } {
  let frame = 0;
  let timer = 0;
  const cancel = () => {
    cancelAnimationFrame(frame);
    window.clearTimeout(timer);
    frame = 0;
    timer = 0;
  };
  const run = () => {
    cancel();
    draw();
  };
  return {
    request() {
      if (frame) return;
      frame = requestAnimationFrame(run);
      timer = window.setTimeout(run, fallbackMs);
    },
    cancel,
  };
}
