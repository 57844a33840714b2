/**
 * The isolation battery: what an attacker inside a tool tries, driven through the public API of a running
 * Bedrock (embedded or cluster layout) with the offline demo model, whose `$ cmd` lines become one bash call
 * each. Every probe prints one marker per attempt (`READ x` / `DENIED x`, `OPEN p` / `CLOSED p`, ...), so a
 * test reads as a list of attempts and their outcomes.
 */
import { existsSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, expect, it } from '@jest/globals';
import type { Client } from '@connectrpc/connect';
import type { ConversationService } from '@bedrock/contracts';
import { Mode, StateKind } from '@bedrock/contracts';

export interface IsolationTarget {
  readonly client: Client<typeof ConversationService>;
  /** The conversation's working directory (usable by the tool user). */
  readonly workspace: string;
  /** Files a tool must not read: the token store, a root-owned 0600 file, credentials. */
  readonly secretFiles: readonly string[];
  /** Service processes whose /proc/PID/environ must stay closed. */
  readonly servicePids: readonly number[];
  /** The system's own endpoints, by name, that no tool may connect to. */
  readonly deniedPorts: Readonly<Record<string, number>>;
  /** A local listener outside the system: reachable in Unrestricted mode (network stays available). */
  readonly openPort: number;
  /** A directory outside the workspace that file permissions would let the tool user write. */
  readonly outsideDir: string;
  /** How long one turn may take, ms. Default 60 000. */
  readonly turnTimeoutMs?: number;
}

export interface ModeProbes {
  /** `id -u` and `id -g` of a tool. */
  readonly uid: string;
  /** `READ f` or `DENIED f` per secret file and per /proc/PID/environ. */
  readonly secrets: string;
  /** `OPEN name` or `CLOSED name` per denied port, and `OPEN outside` / `CLOSED outside` for the open one. */
  readonly ports: string;
  /** The first run's TMPDIR and HOME, then whether the second run sees the first run's files. */
  readonly scratch: string;
}

export interface IsolationResults {
  readonly conversationId: string;
  readonly restricted: ModeProbes;
  readonly unrestricted: ModeProbes & {
    /** `WROTE-IN` when the workspace write worked; `REFUSED-OUT` or `WROTE-OUT` for outside. */
    readonly writes: string;
  };
}

function probeLines(t: IsolationTarget, tag: string): string[] {
  const secrets = [...t.secretFiles.map((f) => `"${f}"`), ...t.servicePids.map((p) => `/proc/${p}/environ`)].join(' ');
  const ports = [...Object.entries(t.deniedPorts), ['outside', t.openPort] as const].map(([name, port]) => `${name}:${port}`).join(' ');
  return [
    `$ echo "uid=$(id -u) gid=$(id -g)"`,
    `$ for f in ${secrets}; do if cat "$f" >/dev/null 2>&1; then echo "READ $f"; else echo "DENIED $f"; fi; done`,
    `$ for e in ${ports}; do if (exec 3<>/dev/tcp/127.0.0.1/\${e#*:}) 2>/dev/null; then echo "OPEN \${e%%:*}"; else echo "CLOSED \${e%%:*}"; fi; done`,
    `$ echo "tmp=$TMPDIR home=$HOME"; echo ${tag} > "$TMPDIR/planted-${tag}" && echo planted`,
    `$ if ls "$TMPDIR" | grep -q planted-${tag}; then echo "SCRATCH SHARED"; else echo "SCRATCH PRIVATE"; fi`,
  ];
}

type ToolResult = { content: string; isError: boolean };

async function waitForState(t: IsolationTarget, id: string, kinds: StateKind[]): Promise<void> {
  const deadline = Date.now() + (t.turnTimeoutMs ?? 60_000);
  for (;;) {
    const state = (await t.client.getConversation({ conversationId: id })).conversation?.state?.kind;
    if (state !== undefined && kinds.includes(state)) return;
    if (Date.now() > deadline)
      throw new Error(
        `conversation ${id} did not reach ${kinds.map((k) => StateKind[k]).join('/')} (state ${state === undefined ? '?' : StateKind[state]})`,
      );
    await sleep(100);
  }
}

/** Tool results of the conversation, in order. */
async function toolResults(t: IsolationTarget, id: string): Promise<ToolResult[]> {
  const { messages } = await t.client.getConversation({ conversationId: id });
  const results: ToolResult[] = [];
  for (const m of messages) {
    for (const block of m.content) {
      if (block.block.case === 'toolResult') results.push({ content: block.block.value.content, isError: block.block.value.isError });
    }
  }
  return results;
}

async function turn(t: IsolationTarget, id: string, lines: string[]): Promise<ToolResult[]> {
  const before = (await toolResults(t, id)).length;
  await t.client.sendMessage({ conversationId: id, text: lines.join('\n') });
  await waitForState(t, id, [StateKind.IDLE]);
  const results = (await toolResults(t, id)).slice(before);
  if (results.length !== lines.length)
    throw new Error(`expected ${lines.length} tool results, got ${results.length}: ${JSON.stringify(results)}`);
  return results;
}

function probes(results: ToolResult[]): ModeProbes {
  const text = (i: number) => results[i]?.content ?? '';
  return { uid: text(0), secrets: text(1), ports: text(2), scratch: `${text(3)}\n${text(4)}` };
}

/**
 * Runs the probes in Restricted mode, then asks for and gets Unrestricted mode and runs them again plus the
 * write and network checks; returns each probe's output so the caller asserts on it.
 */
export async function runIsolationBattery(t: IsolationTarget): Promise<IsolationResults> {
  const created = await t.client.createConversation({ cwd: t.workspace });
  const id = created.conversation?.id;
  if (!id) throw new Error('no conversation id');
  if (created.conversation?.mode !== Mode.RESTRICTED)
    throw new Error('a new conversation should start Restricted on a machine with the sandbox');
  const restricted = probes(await turn(t, id, probeLines(t, 'r')));

  await t.client.sendMessage({ conversationId: id, text: '/upgrade the isolation battery needs to write' });
  await waitForState(t, id, [StateKind.AWAITING_MODE_APPROVAL]);
  await t.client.respondToModeUpgrade({ conversationId: id, approve: true });
  await waitForState(t, id, [StateKind.IDLE]);

  const marker = `bedrock-outside-${process.pid}-${Date.now()}`;
  const results = await turn(t, id, [
    ...probeLines(t, 'u'),
    `$ echo ok > inside-${marker}.txt && echo WROTE-IN; if echo x > "${t.outsideDir}/${marker}" 2>/dev/null; then echo WROTE-OUT; else echo REFUSED-OUT; fi`,
  ]);
  return { conversationId: id, restricted, unrestricted: { ...probes(results.slice(0, 5)), writes: results[5]?.content ?? '' } };
}

export interface IsolationExpectations {
  /** Where the battery ran, for test names. */
  readonly layout: string;
  /** The battery's results (available once the suite's beforeAll ran it). */
  readonly results: () => IsolationResults;
  /** The uid and gid tools must show, or undefined when the tests do not run as root. */
  readonly toolUser?: number;
  /** How many secret files and service environments the battery tried. */
  readonly secrets: () => number;
  /** The names of the denied ports the battery tried. */
  readonly deniedPorts: readonly string[];
  /** The directory given as `outsideDir`, which must stay untouched. */
  readonly outsideDir: () => string;
}

/** The assertions every layout makes on the battery's results, as Jest tests. */
export function defineIsolationExpectations(e: IsolationExpectations): void {
  for (const mode of ['restricted', 'unrestricted'] as const) {
    describe(`${e.layout}: a ${mode} tool`, () => {
      const probes = () => e.results()[mode];
      it('runs as an unprivileged user, never root', () => {
        if (e.toolUser !== undefined) expect(probes().uid.trim()).toBe(`uid=${e.toolUser} gid=${e.toolUser}`);
        expect(probes().uid).not.toMatch(/uid=0\b/);
      });
      it("cannot read the system's secrets or any service's environment", () => {
        expect(probes().secrets).not.toContain('READ');
        expect(probes().secrets.match(/DENIED/g)?.length).toBe(e.secrets());
      });
      it("cannot connect to the system's own ports", () => {
        for (const name of e.deniedPorts) expect(probes().ports).toContain(`CLOSED ${name}`);
        expect(probes().ports).not.toMatch(new RegExp(`OPEN (${e.deniedPorts.join('|')})\\b`));
      });
      it('has a private scratch and home that the next run does not see', () => {
        expect(probes().scratch).toContain('planted');
        expect(probes().scratch).toContain('SCRATCH PRIVATE');
      });
    });
  }
  describe(`${e.layout}: network and writes`, () => {
    it('Restricted has no network at all; Unrestricted reaches a port outside the system', () => {
      expect(e.results().restricted.ports).toContain('CLOSED outside');
      expect(e.results().unrestricted.ports).toContain('OPEN outside');
    });
    it('Unrestricted writes its working directory and nothing else', () => {
      expect(e.results().unrestricted.writes).toContain('WROTE-IN');
      expect(e.results().unrestricted.writes).toContain('REFUSED-OUT');
      expect(existsSync(e.outsideDir()) && readdirSync(e.outsideDir()).some((f) => f.startsWith('bedrock-outside-'))).toBe(false);
    });
  });
}
