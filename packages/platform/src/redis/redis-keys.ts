/**
 * Redis key layout. The names in @bedrock/contracts (`bedrock:conv:<id>:events`,
 * `bedrock:cancel`, `bedrock:runners`) carry the default prefix `bedrock`; a deployment (or a
 * test) with another prefix gets the same names with `bedrock` replaced, so with the default
 * the keys are exactly the documented ones and no two prefixes ever share a key.
 */
import { CHANNEL_CANCEL, RUNNER_CAPABILITIES_KEY, notificationStreamKey } from '@bedrock/contracts';

/** The prefix the contract names are written with. */
const CONTRACT_PREFIX = 'bedrock';

export interface RedisKeys {
  readonly prefix: string;
  /** BullMQ's own `prefix` option: its keys are `<bullPrefix>:<queue>:<suffix>`. */
  readonly bullPrefix: string;
  stream(conversationId: string): string;
  readonly cancelChannel: string;
  /** Hash: runner id -> RunnerCapabilities (protobuf JSON). */
  readonly runners: string;
  /** Sorted set: runner id scored by its expiry time (ms since epoch, Redis server clock). */
  readonly runnersExpiry: string;
}

export function withPrefix(contractKey: string, prefix: string): string {
  if (!contractKey.startsWith(`${CONTRACT_PREFIX}:`)) return `${prefix}:${contractKey}`;
  return prefix + contractKey.slice(CONTRACT_PREFIX.length);
}

export function redisKeys(prefix: string): RedisKeys {
  if (prefix === '') throw new Error('redis prefix must not be empty');
  const runners = withPrefix(RUNNER_CAPABILITIES_KEY, prefix);
  return {
    prefix,
    bullPrefix: `${prefix}:q`,
    stream: (conversationId) => withPrefix(notificationStreamKey(conversationId), prefix),
    cancelChannel: withPrefix(CHANNEL_CANCEL, prefix),
    runners,
    runnersExpiry: `${runners}:expiry`,
  };
}
