/** Relative timestamps ("2 min ago") that stay current, with the exact time in their title. */
import { useEffect, useState } from 'preact/hooks';
import { relativeTime } from '@bedrock/agent-view/format';

const listeners = new Set<() => void>();
let ticker: number | undefined;

/** The current time, refreshed every 30 s for every component using it (one timer for all). */
export function useNow(): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const tick = () => setNow(Date.now());
    listeners.add(tick);
    ticker ??= window.setInterval(() => listeners.forEach((l) => l()), 30_000);
    return () => {
      listeners.delete(tick);
      if (listeners.size === 0 && ticker !== undefined) {
        window.clearInterval(ticker);
        ticker = undefined;
      }
    };
  }, []);
  return now;
}

const EXACT = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

export function RelativeTime({ at, class: cls = 'when' }: { at: number | undefined; class?: string }) {
  const now = useNow();
  if (at === undefined) return null;
  const date = new Date(at);
  return (
    <time class={cls} dateTime={date.toISOString()} title={EXACT.format(date)}>
      {relativeTime(at, now)}
    </time>
  );
}
