/**
 * What a caller may ask of the workspace storage: ids, owners and git URLs, checked strictly
 * before anything touches the disk. Every refusal is INVALID_ARGUMENT with a message naming the
 * field and what it must be.
 */
import { Code, ConnectError } from '@connectrpc/connect';
import type { UidRange } from '../config.ts';

/** `ws-` and 26 characters of [0-9a-z]: never a path, never `.` or `..`. */
export const WORKSPACE_ID = /^ws-[0-9a-z]{26}$/;

export function checkWorkspaceId(id: string, field = 'workspace_id'): string {
  if (!WORKSPACE_ID.test(id)) {
    throw new ConnectError(
      `${field} must be "ws-" and 26 characters of 0-9 and a-z, got ${JSON.stringify(id.slice(0, 80))}`,
      Code.InvalidArgument,
    );
  }
  return id;
}

/** The owner of a workspace: a uid and gid of the allowed range (BEDROCK_TOOL_UIDS), never 0. */
export function checkOwner(uid: number, gid: number, range: UidRange): void {
  for (const [field, value] of [
    ['uid', uid],
    ['gid', gid],
  ] as const) {
    if (value === 0 || value < range.first || value > range.last) {
      throw new ConnectError(
        `${field} ${value} is outside the tool uids this runner may give workspaces to (${range.first}-${range.last}, BEDROCK_TOOL_UIDS)`,
        Code.InvalidArgument,
      );
    }
  }
}

const URL_SCHEMES = new Set(['https:', 'http:', 'ssh:', 'git:']);
/** scp-like `user@host:path`: a user, a host name (no colon, no slash), a path; git reads it as ssh. */
const SCP_LIKE = /^[A-Za-z0-9_][A-Za-z0-9._-]*@[A-Za-z0-9][A-Za-z0-9.-]*:[^:\s][^\s]*$/;

/**
 * A git URL a runner may clone: https://, http://, ssh://, git:// or scp-like user@host:path.
 * Never a local path, file://, or a transport that runs commands (`ext::`); no option-like host
 * or user (`-oProxyCommand=…`), no whitespace or control characters.
 */
export function checkGitUrl(url: string): string {
  const refuse = (why: string): never => {
    throw new ConnectError(
      `git_url ${why}: give an https://, http://, ssh:// or git:// URL, or user@host:path (local paths and file:// are refused)`,
      Code.InvalidArgument,
    );
  };
  // eslint-disable-next-line no-control-regex
  if (url === '' || url.length > 2048 || /[\s\x00-\x1f\x7f]/.test(url)) refuse('is empty, too long or has blanks or control characters');
  if (url.startsWith('-')) refuse('starts with "-"');
  if (SCP_LIKE.test(url)) return url;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return refuse(`${JSON.stringify(url.slice(0, 80))} is not a URL`);
  }
  if (!URL_SCHEMES.has(parsed.protocol)) refuse(`has the scheme ${JSON.stringify(parsed.protocol.slice(0, 20))}`);
  if (parsed.hostname === '' || parsed.hostname.startsWith('-')) refuse('has no host');
  if (parsed.username.startsWith('-')) refuse('has a user starting with "-"');
  if (!/^\/./.test(parsed.pathname)) refuse('names no repository');
  return url;
}
