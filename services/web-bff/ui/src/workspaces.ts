/**
 * Where a conversation works, as CreateConversation takes it: one of the user's workspaces with
 * a relative directory inside it, or (single-user installs) a host directory.
 */
import type { Conversation } from '@bedrock/contracts';
import type { WorkspaceApi } from './api.ts';

export interface Place {
  readonly workspace: string;
  readonly cwd: string;
}

/** The name the new-conversation form offers first, made by the server on first use. */
export const DEFAULT_WORKSPACE = 'default';

/** The directory `path` names inside `top`, or '' when it is not inside it. */
export function inside(top: string, path: string): string {
  const base = top.replace(/\/+$/, '');
  if (path === base) return '';
  return path.startsWith(`${base}/`) ? path.slice(base.length + 1) : '';
}

/** Where `c` works, to start another conversation there (a continuation): its workspace and directory, or its host path. */
export async function placeOf(c: Conversation, workspaces: WorkspaceApi | undefined): Promise<Place> {
  if (!c.workspaceId) return { workspace: '', cwd: c.cwd };
  let cwd = '';
  try {
    const ws = (await workspaces?.listWorkspaces({}))?.workspaces.find((w) => w.id === c.workspaceId);
    if (ws) cwd = inside(ws.path, c.cwd);
  } catch {
    // The workspace's top, then.
  }
  return { workspace: c.workspaceId, cwd };
}
