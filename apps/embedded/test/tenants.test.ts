/**
 * The tenants battery (packages/testkit/src/tenants-battery.ts) against `npm start`'s embedded product
 * with host paths off: its local user (an admin) adds alice and bob, who attack each other through the
 * public API, the offline model running their tools. Shipped defaults except the ports, the data
 * directory and the workspace storage: a loop-mounted btrfs image with a small per-workspace quota, so
 * that the kernel enforces the quota as on a btrfs host. Needs root: docs/testing.md.
 */
import { afterAll, beforeAll } from '@jest/globals';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { AdminService, ConversationService, WorkspaceService } from '@bedrock/contracts';
import { defineTenantsBattery, type TenantsTarget } from '@bedrock/testkit/tenants-battery';
import { startEmbedded, type RunningEmbedded } from '../src/index.ts';

const MiB = 1024 ** 2;
const QUOTA = 16 * MiB;

let bedrock: RunningEmbedded | undefined;
let dataDir = '';
let imageDir = '';
let target: TenantsTarget;

function transport(token: string) {
  return createConnectTransport({
    baseUrl: bedrock!.httpUrl,
    httpVersion: '1.1',
    interceptors: [
      (next) => (req) => {
        req.header.set('authorization', `Bearer ${token}`);
        return next(req);
      },
    ],
  });
}

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'bedrock-tenants-data-'));
  imageDir = mkdtempSync(join(tmpdir(), 'bedrock-tenants-image-'));
  bedrock = await startEmbedded({
    env: {
      ...process.env,
      BEDROCK_DATA_DIR: dataDir,
      BEDROCK_PORT: '0',
      BEDROCK_GRPC_PORT: '0',
      ANTHROPIC_API_KEY: '',
      DATABASE_URL: '',
      LOG_LEVEL: 'warn',
      // More than one user: conversations in workspaces, each user their own uid.
      BEDROCK_HOST_PATHS: 'off',
      // Workspace storage on btrfs (an image the runner creates and loop-mounts), with a quota.
      BEDROCK_WORKSPACE_IMAGE: join(imageDir, 'workspaces.btrfs'),
      BEDROCK_WORKSPACE_IMAGE_SIZE: '512MiB',
      BEDROCK_WORKSPACE_QUOTA: '16MiB',
    },
  });
  const clientsOf = (token: string) => ({
    conversations: createClient(ConversationService, transport(token)),
    workspaces: createClient(WorkspaceService, transport(token)),
  });
  target = {
    admin: createClient(AdminService, transport(bedrock.token)),
    clientsOf,
    workspaceRoot: join(dataDir, 'workspaces'),
    secretFiles: [join(dataDir, 'token')],
    secretDirs: [dataDir],
    repositoryFile: fileURLToPath(new URL('../../../package.json', import.meta.url)),
    quotaBytes: QUOTA,
  };
}, 120_000);

afterAll(async () => {
  await bedrock?.stop();
  const root = join(dataDir, 'workspaces');
  const image = join(imageDir, 'workspaces.btrfs');
  // The mount outlives the runner (docs/workspaces.md): take it down, and its loop device.
  if (dataDir && existsSync(image)) {
    const loop = /^(\/dev\/loop\d+):/.exec(execFileSync('losetup', ['-j', image]).toString())?.[1];
    execFileSync('umount', [root], { stdio: 'ignore' });
    if (loop && execFileSync('losetup', ['-j', image]).toString().includes(loop))
      execFileSync('losetup', ['-d', loop], { stdio: 'ignore' });
  }
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (imageDir) rmSync(imageDir, { recursive: true, force: true });
}, 60_000);

defineTenantsBattery('embedded', () => target);
