import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from '@jest/globals';
import { commonConfigDocs, redisSection } from '../config/common.ts';
import { configMarkdownTable } from '../config/config.ts';
import { METRIC } from './metric-names.ts';
import { createMetrics } from './metrics.ts';

const docs = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../../docs');
const read = (name: string): string => readFileSync(path.join(docs, name), 'utf8');

// The operator docs are checked against the code, so a renamed variable or metric cannot
// leave them stale.
describe('docs', () => {
  it('configuration.md holds the generated table of the common variables', () => {
    const text = read('configuration.md');
    const between = /<!-- common-env:start[^>]*-->\n([\s\S]*?)\n<!-- common-env:end -->/.exec(text);
    expect(between?.[1]).toBe(configMarkdownTable(commonConfigDocs));
  });

  it('transports.md holds the generated table of the Redis settings', () => {
    const between = /<!-- redis-settings:begin[^>]*-->\n([\s\S]*?)\n<!-- redis-settings:end -->/.exec(read('transports.md'));
    expect(between?.[1]).toBe(configMarkdownTable(redisSection));
  });

  it('observability.md lists every Bedrock metric with its labels', async () => {
    const text = read('observability.md');
    const rows = new Map(
      [...text.matchAll(/^\| `(bedrock_\w+)` \| (\w+) \| ([^|]*) \|/gm)].map((m) => [m[1], { type: m[2], labels: m[3]?.trim() }]),
    );
    expect([...rows.keys()].sort()).toEqual(Object.values(METRIC).sort());
    // Types and label names as registered.
    const registry = createMetrics('docs').registry;
    for (const metric of await registry.getMetricsAsJSON()) {
      const row = rows.get(metric.name);
      if (!row) continue;
      expect([metric.name, row.type]).toEqual([metric.name, metric.type]);
      const labels = (registry.getSingleMetric(metric.name) as unknown as { labelNames: string[] }).labelNames;
      expect([metric.name, row.labels]).toEqual([metric.name, labels.map((l) => `\`${l}\``).join(', ')]);
    }
  });
});
