import { describe, it, expect } from '@jest/globals';
import { commandEnv } from './command-env.ts';

describe('commandEnv', () => {
  it('drops the secrets and settings, keeps the rest, and adds git settings', () => {
    const env = commandEnv({ PATH: '/usr/bin', REDIS_URL: 'redis://secret', ANTHROPIC_API_KEY: 'k', BEDROCK_PORT: '1', KEEP_ME: 'yes' });
    expect(env).toEqual({
      PATH: '/usr/bin',
      KEEP_ME: 'yes',
      GIT_TERMINAL_PROMPT: '0',
      GIT_CONFIG_COUNT: '1',
      GIT_CONFIG_KEY_0: 'safe.directory',
      GIT_CONFIG_VALUE_0: '*',
    });
  });

  it('is computed once per base object and frozen, so that a waiting helper matches a run by identity', () => {
    const base = { PATH: '/usr/bin' };
    const first = commandEnv(base);
    expect(commandEnv(base)).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(commandEnv({ PATH: '/usr/bin' })).not.toBe(first);
  });

  it('reads process.env anew each time (it may change)', () => {
    const visible = 'X_TEST_COMMAND_ENV_PROBE';
    expect(commandEnv(process.env)[visible]).toBeUndefined();
    process.env[visible] = 'now';
    try {
      expect(commandEnv(process.env)[visible]).toBe('now');
    } finally {
      delete process.env[visible];
    }
  });
});
