import { describe, expect, it } from '@jest/globals';
import { checkGitUrl, checkOwner, checkWorkspaceId } from './validate.ts';

const range = { first: 200_000, last: 299_999 };

describe('workspace ids, owners and git URLs', () => {
  it('takes only ws- and 26 characters of 0-9a-z', () => {
    expect(checkWorkspaceId('ws-0123456789abcdefghijklmnop')).toBe('ws-0123456789abcdefghijklmnop');
    for (const bad of [
      '',
      '.',
      '..',
      'ws-',
      'ws-0123456789abcdefghijklmno',
      'ws-0123456789abcdefghijklmnopq',
      'ws-0123456789ABCDEFGHIJKLMNOP',
      'ws-../../../../../../../etc',
      'ws-0123456789abcdefghijklmno/',
    ]) {
      expect(() => checkWorkspaceId(bad)).toThrow(/workspace_id must be "ws-" and 26 characters of 0-9 and a-z/);
    }
  });

  it('takes owners of the allowed range only, never 0', () => {
    expect(() => checkOwner(200_000, 299_999, range)).not.toThrow();
    expect(() => checkOwner(0, 200_000, range)).toThrow(
      'uid 0 is outside the tool uids this runner may give workspaces to (200000-299999, BEDROCK_TOOL_UIDS)',
    );
    expect(() => checkOwner(200_000, 0, range)).toThrow(/^\[invalid_argument\] gid 0/);
    expect(() => checkOwner(300_000, 200_000, range)).toThrow(/uid 300000/);
    expect(() => checkOwner(0, 0, { first: 0, last: 10 })).toThrow(/uid 0/);
  });

  it('takes remote git URLs and scp-like addresses', () => {
    for (const ok of [
      'https://github.com/owner/repo.git',
      'http://git.example.com:8080/r',
      'ssh://git@example.com:2222/owner/repo.git',
      'git://127.0.0.1:9418/repo.git',
      'git@github.com:owner/repo.git',
      'https://user:secret@example.com/r.git',
    ]) {
      expect(checkGitUrl(ok)).toBe(ok);
    }
  });

  it('refuses local paths, file://, command transports and option-like hosts', () => {
    for (const bad of [
      '/srv/repo.git',
      './repo',
      '../repo',
      'repo',
      'file:///srv/repo.git',
      'ext::sh -c touch% /tmp/x',
      'ext::sh',
      'fd::3',
      'ssh://-oProxyCommand=touch%20x/repo',
      '-uhttps://x/y',
      'git@-oProxyCommand=x:repo',
      'https://example.com',
      'https://example.com/a b',
      'https://example.com/a\nb',
      'host:path',
      'C:\\\\repo',
      '',
    ]) {
      expect(() => checkGitUrl(bad)).toThrow(/^\[invalid_argument\] git_url .*local paths and file:\/\/ are refused/);
    }
  });
});
