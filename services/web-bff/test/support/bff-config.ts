/** web-bff's config in tests: typed, from no environment (the test's own shell cannot leak in). */
import type { ConfigOverrides } from '@bedrock/platform/config';
import { readWebBffConfig, type WebBffConfig } from '../../src/config.ts';

/**
 * Loopback, free ports, in-process streams, no web UI files and a short shutdown grace; `more`
 * (durations in ms) on top, section by section.
 */
export function testBffConfig(more: ConfigOverrides<WebBffConfig> = {}): WebBffConfig {
  return readWebBffConfig(
    {},
    {
      ...more,
      server: { host: '127.0.0.1', httpPort: 0, grpcPort: 0, metricsPort: 0, shutdownGrace: 500, ...more.server },
      transport: { kind: 'memory', ...more.transport },
      http: { uiDir: '/nonexistent/bedrock-ui', ...more.http },
    },
  );
}
