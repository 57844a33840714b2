/**
 * Keeps the Unrestricted port rules built once. Landlock refuses a few ports only by one "allow"
 * rule per other port, so a holder process (`bedrock-sandbox --hold-net-ruleset`) builds them once
 * per set of denied ports and each run copies the ready ruleset with pidfd_getfd (`--net-ruleset
 * PID:FD`). If a holder is missing or dies, runs build the rules themselves: slower, never weaker.
 * The costs: docs/tool-runner.md, "The sandbox (both modes)", step 3.
 */
import { spawn, type ChildProcess } from 'node:child_process';

export interface NetRulesetHolder {
  /**
   * `PID:FD` of a holder for exactly these ports, or undefined when there is none (yet). When the
   * set changes (a composition adds a port), a new holder replaces the old.
   */
  spec(ports: ReadonlySet<number>): Promise<string | undefined>;
  close(): void;
}

interface Held {
  readonly key: string;
  readonly child: ChildProcess;
  readonly ready: Promise<string | undefined>;
}

export function createNetRulesetHolder(helperPath: string): NetRulesetHolder {
  let held: Held | undefined;
  let closed = false;

  function start(key: string, ports: readonly number[]): Held {
    const child = spawn(helperPath, ['--hold-net-ruleset', ...ports.flatMap((p) => ['--deny-port', String(p)])], {
      stdio: ['pipe', 'pipe', 'ignore'],
    });
    const ready = new Promise<string | undefined>((resolve) => {
      let out = '';
      child.stdout?.setEncoding('utf8');
      child.stdout?.on('data', (chunk: string) => {
        out += chunk;
        const m = /^ready (\d+) (\d+)\n/.exec(out);
        if (m) resolve(`${m[1]}:${m[2]}`);
        else if (out.includes('\n')) resolve(undefined); // "unsupported" (ABI < 4) or garbage
      });
      child.once('error', () => resolve(undefined));
      child.once('exit', () => {
        resolve(undefined);
        if (held?.child === child) held = undefined;
      });
    });
    // Not a reason to keep the runner alive.
    child.unref();
    (child.stdout as unknown as { unref?: () => void } | null)?.unref?.();
    (child.stdin as unknown as { unref?: () => void } | null)?.unref?.();
    return { key, child, ready };
  }

  return {
    async spec(ports) {
      if (closed || ports.size === 0) return undefined;
      const sorted = [...ports].sort((a, b) => a - b);
      const key = sorted.join(',');
      if (held?.key !== key) {
        const previous = held;
        held = start(key, sorted);
        // Runs already holding the old PID:FD either copied it or fall back to building rules.
        if (previous) setTimeout(() => previous.child.kill('SIGKILL'), 5000).unref();
      }
      return held.ready;
    },
    close() {
      closed = true;
      held?.child.kill('SIGKILL');
      held = undefined;
    },
  };
}
