/**
 * A conversation's write access as a tool-runner reports it (WorkspaceStorageService
 * CheckWriteAccess; docs/workspaces.md, "Write access"): where its Unrestricted tools may write,
 * as whom, and whether they can. Asked when a client reads one conversation (not for lists),
 * each answer reused for a couple of seconds.
 */
import { create } from '@bufbuild/protobuf';
import { WriteAccessSchema, type WriteAccess } from '@bedrock/contracts';
import type { Logger } from '@bedrock/platform/server';
import type { ConversationRecord } from '../store/conversation-store.ts';
import type { WorkspaceStorage } from './storage-client.ts';

/** How long one answer is reused, ms: a client that reads a conversation twice asks the runner once. */
const CACHE_MS = 2000;

export function createWriteAccessProbe(
  storage: Pick<WorkspaceStorage, 'writeAccess'>,
  logger: Pick<Logger, 'warn'>,
): (record: Pick<ConversationRecord, 'cwd' | 'workspace'>) => Promise<WriteAccess | undefined> {
  const cache = new Map<string, { at: number; value: WriteAccess }>();
  let lastProblem = '';
  return async (record) => {
    const uid = record.workspace?.toolUid ?? null;
    const key = `${uid ?? 'host'}\0${record.cwd}`;
    const hit = cache.get(key);
    if (hit && Date.now() - hit.at < CACHE_MS) return hit.value;
    try {
      const found = await storage.writeAccess(record.cwd, uid === null ? null : { uid, gid: uid });
      const value = create(WriteAccessSchema, { path: record.cwd, toolUser: found.user, writable: found.writable, problem: found.problem });
      if (cache.size > 1000) cache.clear();
      cache.set(key, { at: Date.now(), value });
      return value;
    } catch (err) {
      // Reported without the figure: one line per new problem, not per read.
      const message = (err as Error).message;
      if (message !== lastProblem) logger.warn({ err }, 'write access of a working directory not known: no tool-runner answered');
      lastProblem = message;
      return undefined;
    }
  };
}
