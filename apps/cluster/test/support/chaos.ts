/**
 * Crash semantics under load, shared by the chaos end-to-end test and the chaos benchmark: a cluster on
 * the SHIPPED defaults with its own Redis server (so it can be restarted), N conversations in
 * Unrestricted mode whose tools append a line to a ledger file, and one fault per turn (FaultKind).
 * `fault()` measures until every conversation is at rest; `check()` lists every broken promise.
 * docs/testing.md, "Crash semantics (chaos)".
 */
import { chownSync, mkdtempSync, readFileSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { MessageType, StateKind } from '@bedrock/contracts';
import type { MessagesRequestBody, ScriptedResponse } from '@bedrock/offline-model';
import { freePort } from '@bedrock/platform/server';
import type { ServiceProcess } from '../../src/index.ts';
import { startE2e, type E2e } from './e2e.ts';
import { OwnRedis } from './own-redis.ts';
import { startRedisCluster, type LocalRedisCluster } from '@bedrock/testkit/redis-cluster';

/**
 * `tool-runner`, `llm-gateway`, `conversation`: kill -9 of that replica; `redis`: a Redis restart
 * that loses every key.
 * `postgres`: kill -9 of the primary's postmaster (startChaos's `killPostgresPrimary`; pg-failover.e2e.test.ts).
 * `redis-master`: on a Redis Cluster (`redis: 'cluster'`), kill -9 of a master; its replica takes over.
 */
export type FaultKind = 'tool-runner' | 'llm-gateway' | 'conversation' | 'redis' | 'postgres' | 'redis-master';
export const FAULT_KINDS: readonly FaultKind[] = ['tool-runner', 'llm-gateway', 'conversation', 'redis'];

export interface FaultOutcome {
  readonly fault: FaultKind;
  /** From the fault (the kill) until every conversation was at rest, ms. */
  readonly restMs: number;
  /** What the victim held when it died (running tools, requests in flight, busy conversations). */
  readonly held: string;
}

export interface Chaos {
  readonly e: E2e;
  readonly ids: readonly string[];
  /**
   * Runs one turn on every conversation and injects `fault` in the middle of it. With `inject`
   * false the same turn runs the same way and is measured from the same moment, without the
   * fault: the time the turn's rest takes anyway on this machine at this load, to compare with.
   */
  fault(kind: FaultKind, inject?: boolean): Promise<FaultOutcome>;
  /**
   * With every conversation at rest: `kill()`, then at once the next turn's message to every
   * conversation, each retried with the same request id until acknowledged (a retry after a
   * lost answer is applied once). Waits until every conversation is at rest again.
   */
  sendThrough(kill: () => Promise<string>): Promise<FaultOutcome & { retries: number }>;
  /**
   * Redis commands per second of the whole cluster over `ms`: idle, or with every conversation
   * running a long tool (`busy`). Each command name with its rate, highest first.
   */
  redisLoad(ms: number, busy: boolean): Promise<{ perSecond: number; byCommand: [string, number][] }>;
  /**
   * Everything that went wrong so far (empty when every promise held): a ledger line written twice
   * (a tool run twice), a tool_use not answered exactly once, a user message lost or doubled; and
   * counts for the report.
   */
  check(): Promise<{ problems: string[]; toolCalls: number; interrupted: number; lost: number; ledgerLines: number }>;
  close(): Promise<void>;
}

const TOOL_UID = 65534;
/** At rest: idle, or an error the user can act on. */
const AT_REST = new Set([StateKind.IDLE, StateKind.ERROR]);
const INTERRUPTED = /The tool-runner stopped while this/;
const LOST = /the work was lost/;

const say = (text: string, delayMs = 0): ScriptedResponse => ({ kind: 'message', content: [{ type: 'text', text }], delayMs });
const call = (name: string, input: unknown): ScriptedResponse => ({ kind: 'message', content: [{ type: 'tool_use', name, input }] });

function textsOf(message: MessagesRequestBody['messages'][number]): string[] {
  if (typeof message.content === 'string') return [message.content];
  return message.content.flatMap((b) => (b.type === 'text' && b.text !== undefined ? [b.text] : []));
}

export interface ChaosOptions {
  readonly conversations?: number;
  readonly log?: (line: string) => void;
  /** The cluster's database (default: a new database on the local PostgreSQL). */
  readonly databaseUrl?: string;
  /** The `postgres` fault: kills the primary, says what it killed. */
  readonly killPostgresPrimary?: () => Promise<string>;
  /** `single` (default): a redis-server of its own. `cluster`: a Redis Cluster of its own, 3 masters + 3 replicas. */
  readonly redis?: 'single' | 'cluster';
}

export async function startChaos(label: string, options: ChaosOptions = {}): Promise<Chaos> {
  const count = options.conversations ?? 20;
  const log = options.log ?? ((line: string) => console.log(line));
  const redisCluster: LocalRedisCluster | undefined = options.redis === 'cluster' ? await startRedisCluster() : undefined;
  const redis = new OwnRedis(redisCluster ? 0 : await freePort());
  if (!redisCluster) await redis.start();
  // The tools' working directory belongs to the tool user (tools run as uid 65534).
  const workdir = mkdtempSync(join(tmpdir(), `bedrock-chaos-${label}-`));
  chownSync(workdir, TOOL_UID, TOOL_UID);
  const ledger = join(workdir, 'ledger.txt');

  let e: E2e;
  try {
    e = await startE2e(label, {
      // What the images run: a replica restarted after its kill starts from the production
      // bundle (through tsx it would compile its sources again, about 1.5 s more CPU on the
      // machine that is recovering).
      runtime: 'bundle',
      ...(redisCluster ? { redisUrl: redisCluster.url, redisCluster: { ports: redisCluster.ports } } : { redisUrl: redis.url }),
      ...(options.databaseUrl ? { databaseUrl: options.databaseUrl } : {}),
    });
  } catch (err) {
    await redis.kill();
    await redisCluster?.stop();
    throw err;
  }
  // On a cluster: a node (SCAN and INFO see its keys only; runnerHolding is for a single Redis).
  const admin = new Redis(redisCluster?.url ?? redis.url, { maxRetriesPerRequest: 1 });

  /** The supervisor brings a killed replica back by itself, as Kubernetes would. */
  const backBySupervisor = async (victim: ServiceProcess, restartsBefore: number): Promise<void> => {
    await e.waitFor(`${victim.name} restarted by the supervisor`, () => victim.restarts() > restartsBefore, 30_000);
    await victim.waitReady();
  };
  admin.on('error', () => undefined);
  const prefix = `e2e-${label}-${process.pid}`;

  // The script: what to answer, by the conversation and what its history holds (not a queue of
  // answers), so a request repeated after a crash gets the same answer.
  let slowEnds = false;
  const answeredEnds = new Set<string>();
  let slowInFlight = 0;
  const names = Array.from({ length: count }, (_, i) => `c${String(i + 1).padStart(2, '0')}`);
  for (const name of names) {
    e.routeWith(`chaos ${name} `, (request) => {
      const messages = request.body?.messages ?? [];
      // The last user message of ours ("chaos cNN setup" or "turn K"), and the tool results since.
      let at = -1;
      let text = '';
      messages.forEach((m, i) => {
        if (m.role !== 'user') return;
        const ours = textsOf(m).find((t) => t.startsWith('chaos ') || t.startsWith('turn '));
        if (ours !== undefined) {
          at = i;
          text = ours;
        }
      });
      const results = messages
        .slice(at + 1)
        .flatMap((m) => (m.role === 'user' && Array.isArray(m.content) ? m.content.filter((b) => b.type === 'tool_result') : [])).length;
      if (text.startsWith('chaos '))
        return results === 0 ? call('request_mode_upgrade', { reason: 'append lines to the ledger' }) : say('ready');
      const turn = /^turn (\d+)/.exec(text)?.[1] ?? '?';
      if (text.endsWith(' hold')) return results === 0 ? call('bash', { command: 'sleep 8' }) : say(`turn ${turn} held`);
      if (results === 0) return call('bash', { command: `echo ${name}-t${turn}-s1 >> ledger.txt; sleep 2` });
      if (results === 1) return call('bash', { command: `echo ${name}-t${turn}-s2 >> ledger.txt` });
      // The turn's last answer; slow the first time while a gateway is to be killed.
      const end = `${name}-t${turn}`;
      if (slowEnds && !answeredEnds.has(end)) {
        answeredEnds.add(end);
        slowInFlight++;
        setTimeout(() => slowInFlight--, 2500);
        return say(`turn ${turn} done`, 2500);
      }
      return say(`turn ${turn} done`);
    });
  }

  const states = async (): Promise<Map<string, StateKind>> => {
    const { conversations } = await e.client.listConversations({ pageSize: 200 });
    return new Map(conversations.map((c) => [c.id, c.state?.kind ?? StateKind.UNSPECIFIED]));
  };
  const busyCount = async (kind?: StateKind): Promise<number> => {
    const s = await states().catch(() => new Map<string, StateKind>());
    return ids.filter((id) => (kind === undefined ? !AT_REST.has(s.get(id)!) : s.get(id) === kind)).length;
  };

  // Setup: every conversation asks for Unrestricted mode and the user approves.
  const ids: string[] = [];
  for (const name of names) {
    const conv = (await e.client.createConversation({ cwd: workdir })).conversation!;
    ids.push(conv.id);
    await e.client.sendMessage({ conversationId: conv.id, text: `chaos ${name} setup` });
  }
  await e.waitFor(
    'every conversation to ask for Unrestricted mode',
    async () => (await busyCount(StateKind.AWAITING_MODE_APPROVAL)) === count,
    60_000,
  );
  for (const id of ids) await e.client.respondToModeUpgrade({ conversationId: id, approve: true });
  await e.waitFor('every conversation to be ready', async () => (await busyCount()) === 0, 60_000);

  let turn = 0;
  const sent = new Map<string, string[]>(ids.map((id, i) => [id, [`chaos ${names[i]} setup`]]));

  const runnerHolding = async (runner: string): Promise<number> => {
    let n = 0;
    let cursor = '0';
    do {
      // Run records: `<prefix>:{<bucket>}:runs:tool/...` (redis-keys.ts).
      const [next, keys] = await admin.scan(cursor, 'MATCH', `${prefix}:{*}:runs:tool/*`, 'COUNT', 1000);
      cursor = next;
      for (const key of keys.filter((k) => !k.endsWith(':alive'))) {
        const [owner, state] = await admin.hmget(key, 'owner', 'state');
        if (state === 'started' && owner?.startsWith(`${runner}#`)) n++;
      }
    } while (cursor !== '0');
    return n;
  };

  /** Waits for the turn to be in full swing (at most 20 s; on a slow machine the fault comes anyway). */
  async function mid(what: string, probe: () => boolean | Promise<boolean>): Promise<void> {
    await e.waitFor(what, probe, 20_000).catch(() => log(`${what}: not reached in 20 s, injecting the fault anyway`));
  }
  /** How many conversations started the first tool of this turn (its line is in the ledger; it then sleeps 2 s). */
  const firstToolsStarted = () =>
    existsSync(ledger)
      ? readFileSync(ledger, 'utf8')
          .split('\n')
          .filter((l) => l.endsWith(`-t${turn}-s1`)).length
      : 0;

  async function untilRest(from: number): Promise<number> {
    await e.waitFor('every conversation to be at rest', async () => (await busyCount()) === 0, 90_000);
    return Date.now() - from;
  }

  return {
    e,
    ids,
    async fault(kind, inject = true) {
      turn++;
      slowEnds = kind === 'llm-gateway';
      for (const id of ids) {
        await e.client.sendMessage({ conversationId: id, text: `turn ${turn}` });
        sent.get(id)!.push(`turn ${turn}`);
      }
      let held = '';
      let at = 0;
      switch (kind) {
        case 'tool-runner': {
          await mid('half the first tools started', () => firstToolsStarted() >= count / 2);
          // The first tools are under way (they sleep 2 s): kill the runner holding the most.
          const runners = e.cluster.processes.filter((p) => p.service === 'tool-runner');
          const holding = await Promise.all(runners.map((r) => runnerHolding(r.name)));
          const victim = runners[holding.indexOf(Math.max(...holding))]!;
          const restartsBefore = victim.restarts();
          at = Date.now();
          held = `${Math.max(...holding)} running tools on ${victim.name}`;
          if (!inject) return { fault: kind, restMs: await untilRest(at), held };
          victim.kill('SIGKILL');
          await victim.exited();
          const rest = await untilRest(at);
          await backBySupervisor(victim, restartsBefore);
          return { fault: kind, restMs: rest, held };
        }
        case 'llm-gateway': {
          await mid('slow answers in flight', () => slowInFlight >= count / 2);
          const victim = e.cluster.byName('llm-gateway-1');
          const restartsBefore = victim.restarts();
          at = Date.now();
          if (inject) victim.kill('SIGKILL');
          held = `${slowInFlight} requests in flight on 2 gateways`;
          // Only the answers in flight at the kill are slow: one asked for later (a turn that was
          // between requests) would add its own 2.5 s to the time measured, which is not recovery.
          slowEnds = false;
          if (!inject) return { fault: kind, restMs: await untilRest(at), held };
          await victim.exited();
          const rest = await untilRest(at);
          await backBySupervisor(victim, restartsBefore);
          return { fault: kind, restMs: rest, held };
        }
        case 'conversation': {
          // Mid-turn: events of every kind are being applied (tool results, LLM answers).
          await mid('half the first tools started', () => firstToolsStarted() >= count / 2);
          await new Promise((r) => setTimeout(r, 1800));
          const victim = e.cluster.byName('conversation-2');
          held = `${await busyCount()} busy conversations`;
          const restartsBefore = victim.restarts();
          at = Date.now();
          if (!inject) return { fault: kind, restMs: await untilRest(at), held };
          victim.kill('SIGKILL');
          await victim.exited();
          const rest = await untilRest(at);
          await backBySupervisor(victim, restartsBefore);
          return { fault: kind, restMs: rest, held };
        }
        case 'redis': {
          await mid('half the first tools started', () => firstToolsStarted() >= count / 2);
          held = `${await busyCount()} busy conversations, every job and stream`;
          at = Date.now();
          if (!inject) return { fault: kind, restMs: await untilRest(at), held };
          await redis.kill();
          await redis.start();
          const rest = await untilRest(at);
          return { fault: kind, restMs: rest, held };
        }
        case 'postgres': {
          if (!options.killPostgresPrimary) throw new Error('the postgres fault needs startChaos({ killPostgresPrimary })');
          // Mid-turn: tools running, their results and LLM answers being applied and committed.
          await mid('half the first tools started', () => firstToolsStarted() >= count / 2);
          held = `${await busyCount()} busy conversations`;
          at = Date.now();
          if (!inject) return { fault: kind, restMs: await untilRest(at), held };
          held += `; killed ${await options.killPostgresPrimary()}`;
          const rest = await untilRest(at);
          return { fault: kind, restMs: rest, held };
        }
        case 'redis-master': {
          if (!redisCluster) throw new Error('redis-master needs a Redis Cluster (redis: cluster)');
          await mid('half the first tools started', () => firstToolsStarted() >= count / 2);
          const [victim] = await redisCluster.masters();
          held = `${await busyCount()} busy conversations, a third of the slots (master on port ${victim})`;
          at = Date.now();
          if (!inject) return { fault: kind, restMs: await untilRest(at), held };
          await redisCluster.kill(victim!);
          const rest = await untilRest(at);
          await redisCluster.waitHealthy(30_000);
          log(`redis-master: ${victim} killed, its replica promoted, the cluster healthy again`);
          return { fault: kind, restMs: rest, held };
        }
      }
    },

    async sendThrough(kill) {
      await untilRest(Date.now());
      turn++;
      const at = Date.now();
      const killed = await kill();
      let retries = 0;
      await Promise.all(
        ids.map(async (id) => {
          const requestId = `chaos-${label}-turn-${turn}-${id}`;
          for (;;) {
            try {
              await e.client.sendMessage({ conversationId: id, text: `turn ${turn}`, requestId });
              break;
            } catch (err) {
              retries++;
              if (Date.now() - at > 60_000) throw err;
              await new Promise((r) => setTimeout(r, 200));
            }
          }
          sent.get(id)!.push(`turn ${turn}`);
        }),
      );
      const rest = await untilRest(at);
      return { fault: 'postgres', restMs: rest, held: `killed ${killed}, then sent turn ${turn} to ${count} conversations`, retries };
    },

    async redisLoad(ms, busy) {
      if (busy) {
        turn++;
        for (const id of ids) {
          await e.client.sendMessage({ conversationId: id, text: `turn ${turn} hold` });
          sent.get(id)!.push(`turn ${turn} hold`);
        }
        await e.waitFor('every conversation in its long tool', async () => (await busyCount(StateKind.TOOL_EXECUTING)) === count, 30_000);
      } else {
        await e.waitFor('every conversation at rest', async () => (await busyCount()) === 0, 30_000);
      }
      const calls = async (): Promise<Map<string, number>> => {
        const info = (await admin.info('commandstats')) as string;
        return new Map([...info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)].map((m) => [m[1]!, Number(m[2])]));
      };
      const before = await calls();
      await new Promise((r) => setTimeout(r, ms));
      const after = await calls();
      // Less this measurement's own INFO calls.
      const byCommand = [...after.entries()]
        .map(([name, n]): [string, number] => [name, (n - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0)) / (ms / 1000)])
        .filter(([, rate]) => rate > 0)
        .sort((a, b) => b[1] - a[1]);
      if (busy) await untilRest(Date.now());
      return { perSecond: byCommand.reduce((sum, [, rate]) => sum + rate, 0), byCommand };
    },

    async check() {
      const problems: string[] = [];
      const lines = existsSync(ledger) ? readFileSync(ledger, 'utf8').split('\n').filter(Boolean) : [];
      const seen = new Map<string, number>();
      for (const line of lines) seen.set(line, (seen.get(line) ?? 0) + 1);
      for (const [line, n] of seen) if (n > 1) problems.push(`ledger line ${line} written ${n} times (a tool ran twice)`);
      let toolCalls = 0;
      let interrupted = 0;
      let lost = 0;
      for (const id of ids) {
        const { messages } = await e.client.getConversation({ conversationId: id });
        const asked = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolUse' ? [b.block.value.id] : [])));
        const results = messages.flatMap((m) => m.content.flatMap((b) => (b.block.case === 'toolResult' ? [b.block.value] : [])));
        const answered = results.map((r) => r.toolUseId);
        if (JSON.stringify(answered) !== JSON.stringify(asked))
          problems.push(`${id}: tool_use ids ${asked.join(',')} answered by ${answered.join(',')}`);
        toolCalls += asked.length;
        interrupted += results.filter((r) => INTERRUPTED.test(r.content)).length;
        lost += results.filter((r) => LOST.test(r.content)).length;
        const users = messages
          .filter((m) => m.type === MessageType.USER)
          .map((m) => m.content.flatMap((b) => (b.block.case === 'text' ? [b.block.value.text] : [])).join(''));
        if (JSON.stringify(users) !== JSON.stringify(sent.get(id)))
          problems.push(`${id}: user messages ${JSON.stringify(users)}, sent ${JSON.stringify(sent.get(id))}`);
      }
      return { problems, toolCalls, interrupted, lost, ledgerLines: lines.length };
    },

    async close() {
      log('closing the chaos cluster');
      admin.disconnect();
      await e.close();
      await redis.kill();
      await redisCluster?.stop();
      rmSync(workdir, { recursive: true, force: true });
    },
  };
}
