/**
 * `npm start`: the whole product on its embedded defaults, in this one process. See
 * apps/embedded and docs/embedded.md. Stops cleanly on Ctrl-C or SIGTERM.
 */
import { onShutdown } from '@bedrock/platform/server';
import { startEmbedded } from '@bedrock/embedded';

const bedrock = await startEmbedded();
const cli = `BEDROCK_URL=${bedrock.httpUrl} npx bedrock`;
console.log(`
Bedrock is running (embedded: PostgreSQL in-process, in-process queues, data in ${bedrock.dataDir}).
${bedrock.offline ? 'Model: the OFFLINE DEMO model (no ANTHROPIC_API_KEY set). It is not a language model: try "$ ls" lines, /write, /think, /think-long, /cut, /upgrade, /agents, /usage.\n' : ''}
  Web UI:   ${bedrock.httpUrl}/?token=${bedrock.token}
  gRPC:     ${bedrock.grpcUrl}   (token in ${bedrock.dataDir}/token)
  Tools:    ${bedrock.toolIsolation}
  Try:      ID=$(${cli} new --cwd "$PWD") && ${cli} send "$ID" '$ ls' --wait

Press Ctrl-C to stop.`);
onShutdown(() => bedrock.stop(), { graceMs: 20_000 });
