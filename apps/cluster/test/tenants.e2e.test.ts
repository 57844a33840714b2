/**
 * The tenants battery (packages/testkit/src/tenants-battery.ts) in the cluster layout: every service its
 * own process, real Postgres and Redis, two tool-runners sharing the workspace root
 * `<cluster dir>/workspaces`, host paths off. The cluster's user, the bootstrap admin (BEDROCK_ADMIN_USERS),
 * adds alice and bob with AdminService, and the two attack each other through web-bff. The root is plain
 * directories, not btrfs: no quota to test here (the embedded suite tests it on a btrfs image).
 */
import { afterAll, beforeAll } from '@jest/globals';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { offlineReply } from '@bedrock/offline-model';
import { defineTenantsBattery, type TenantsTarget } from '@bedrock/testkit/tenants-battery';
import { startE2e, type E2e } from './support/e2e.ts';

let e: E2e;
let target: TenantsTarget;

beforeAll(async () => {
  e = await startE2e('tenants', { hostPaths: 'default', replicas: { conversation: 1, gateway: 1, toolRunner: 2 } });
  // The offline model answers behind the local Messages API server, through the gateway's real SDK:
  // a `$ cmd` line is one bash call.
  e.routeWith('', (request) => offlineReply(request.body!));
  const dir = e.cluster.dir;
  target = {
    admin: e.admin,
    clientsOf: (token) => e.as(token),
    workspaceRoot: join(dir, 'workspaces'),
    secretFiles: [join(dir, 'token'), ...Object.values(e.cluster.secrets.tokenFiles), e.cluster.secrets.peersFile],
    secretDirs: [dir, join(dir, 'secrets'), join(dir, 'logs')],
    repositoryFile: fileURLToPath(new URL('../../../package.json', import.meta.url)),
  };
}, 180_000);

afterAll(async () => {
  await e?.close();
}, 60_000);

defineTenantsBattery('cluster', () => target);
