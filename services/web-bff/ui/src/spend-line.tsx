/**
 * One small line under the conversation list: what the user spent today and this month against
 * their budgets (ConversationService.GetUsage; docs/web-ui.md). Loaded with the list and once a
 * minute; a failed load keeps the last figures (the line is information, not a control).
 */
import type { UserUsage } from '@bedrock/contracts';
import { cacheReadPhrase, spendSummary } from '@bedrock/agent-view/money';
import { useEffect, useState } from 'preact/hooks';
import type { Api } from './api.ts';

const REFRESH_MS = 60_000;

export function SpendLine(props: { readonly api: Api; readonly refresh: number }) {
  const [usage, setUsage] = useState<UserUsage | undefined>(undefined);
  useEffect(() => {
    let stopped = false;
    const load = () =>
      props.api.getUsage({}).then(
        (res) => {
          if (!stopped && res.usage) setUsage(res.usage);
        },
        () => undefined,
      );
    void load();
    const timer = window.setInterval(() => void load(), REFRESH_MS);
    return () => {
      stopped = true;
      window.clearInterval(timer);
    };
  }, [props.refresh]);
  if (!usage) return null;
  const l = usage.limits;
  return (
    <p
      class="list-status spend-line"
      title="Spend at the model's prices; budgets reset at midnight UTC and on the first of the month; the cache share is the part of the input read from the prompt cache"
    >
      {spendSummary(usage.spentTodayMicros, l?.dailyBudgetMicros ?? 0n, usage.spentThisMonthMicros, l?.monthlyBudgetMicros ?? 0n)}
      {/* Of this month's input, the part read from the prompt cache (billed at 0.1x). */}
      {cacheReadPhrase(usage.tokensThisMonth) ? ` · ${cacheReadPhrase(usage.tokensThisMonth)} this month` : ''}
    </p>
  );
}
