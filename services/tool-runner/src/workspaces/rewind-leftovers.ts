/**
 * The entries a rewind makes beside the workspace (ROOT/.rew-, .rdy-, .old-), and how a runner
 * finishes or undoes what a killed one left: afterwards the workspace is exactly as before or as
 * after the rewind (docs/workspaces.md#crash-safety).
 */
import { rename } from 'node:fs/promises';
import { join } from 'node:path';
import { lstatOrUndefined } from './errno.ts';

const LEFTOVER = /^\.(rew|rdy|old)-(ws-[0-9a-z]{26})-([0-9a-z]+)-[0-9a-f]+$/;

/** A rewind's three paths: being built, built (complete), and the workspace it replaced. `stamp`: `<time base 36>-<random hex>`. */
export function rewindPaths(root: string, workspaceId: string, stamp: string): { building: string; ready: string; old: string } {
  const tag = `${workspaceId}-${stamp}`;
  return { building: join(root, `.rew-${tag}`), ready: join(root, `.rdy-${tag}`), old: join(root, `.old-${tag}`) };
}

/** The workspaces that some of `names` (the entries of ROOT) are rewind leftovers of. */
export function leftoverWorkspaceIds(names: readonly string[]): Set<string> {
  return new Set(names.map((n) => LEFTOVER.exec(n)?.[2]).filter((x): x is string => x !== undefined));
}

export interface RecoverOptions {
  readonly root: string;
  readonly deleteSubvolume: (path: string) => Promise<void>;
  readonly log: (level: 'info' | 'warn', message: string) => void;
}

/** Finishes or undoes the rewinds of `workspaceId` left among `names` at least `minAgeMs` old. */
export async function recoverRewinds(
  options: RecoverOptions,
  workspaceId: string,
  names: readonly string[],
  minAgeMs: number,
): Promise<void> {
  const { root, log } = options;
  const cutoff = Date.now() - minAgeMs;
  const mine = names
    .map((name) => ({ name, m: LEFTOVER.exec(name) }))
    .filter((x) => x.m && x.m[2] === workspaceId && parseInt(x.m[3]!, 36) <= cutoff);
  if (mine.length === 0) return;
  const live = join(root, workspaceId);
  const drop = async (name: string, why: string): Promise<void> => {
    log('warn', `checkpoints: ${name} left by a killed rewind: ${why}`);
    await options.deleteSubvolume(join(root, name));
  };
  for (const { name } of mine.filter((x) => x.m![1] === 'rew')) await drop(name, 'never completed, dropped (the workspace is as before)');
  for (const { name } of mine.filter((x) => x.m![1] === 'rdy')) {
    if (await lstatOrUndefined(live)) await drop(name, 'the swap had not started, dropped (the workspace is as before)');
    else {
      await rename(join(root, name), live);
      log('warn', `checkpoints: ${name} left by a killed rewind: swapped into place (the workspace is as after)`);
    }
  }
  for (const { name } of mine.filter((x) => x.m![1] === 'old')) {
    if (await lstatOrUndefined(live)) await drop(name, 'the replaced workspace, deleted (the workspace is as after)');
    else {
      await rename(join(root, name), live);
      log('warn', `checkpoints: ${name} left by a killed rewind: renamed back (the workspace is as before)`);
    }
  }
}
