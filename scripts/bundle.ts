/**
 * Builds the production bundles `dist/<service>/main.js` (all four services, or those named):
 *   npx tsx scripts/bundle.ts [conversation|llm-gateway|tool-runner|web-bff ...]
 * The Dockerfiles run this in their build stage and copy `dist/<service>`.
 */
import { bundleService, SERVICES, type Service } from '../packages/deploy-check/src/bundle.ts';

const wanted = process.argv.slice(2);
for (const name of wanted)
  if (!(SERVICES as readonly string[]).includes(name)) throw new Error(`unknown service ${name}; expected one of ${SERVICES.join(', ')}`);
for (const service of (wanted.length ? wanted : SERVICES) as Service[]) {
  const r = await bundleService(service);
  console.log(`${service}: ${r.mainFile} (${(r.bytes / 1024).toFixed(0)} KiB), externals ${JSON.stringify(r.externals)}`);
}
