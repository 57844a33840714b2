/**
 * Checkpoints end to end (docs/workspaces.md, "Checkpoints") through a real web-bff, conversation
 * service (Postgres, Redis) and tool-runner serving the workspaces on a loop-mounted btrfs image:
 * the turn's checkpoint before its first tool job, RewindConversation, GetWorkspaceDiff,
 * ForkConversation with files, and deleting a conversation frees its checkpoints. Needs root and
 * btrfs-progs.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { FileChangeKind, RewindScope, StateKind, type CheckpointService } from '@bedrock/contracts';
import { startSystem, type System } from './support/system.ts';
import { asOwner, checkpointClient, describeBtrfs as describeBtrfsIf, toolTurn } from './support/tool-turn.ts';

const describeBtrfs = describeBtrfsIf('checkpoints.test.ts');

async function failure(promise: Promise<unknown>): Promise<ConnectError> {
  try {
    await promise;
  } catch (err) {
    return ConnectError.from(err);
  }
  throw new Error('the call succeeded');
}

// The test plays the llm-gateway and the tool-runner's tool work on the real queues, doing each
// tool's file changes in the workspace as its owner (support/tool-turn.ts).
describeBtrfs('checkpoints through web-bff', () => {
  let s: System;
  let pool: pg.Pool;
  let checkpoints: Client<typeof CheckpointService>;

  beforeAll(async () => {
    s = await startSystem({ label: 'ckpt', workspaceStorage: true, workspaceImage: true });
    pool = new pg.Pool({ connectionString: s.db.url, max: 1 });
    checkpoints = checkpointClient(s, s.tokens.alice!);
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    await s?.close();
  }, 60_000);

  const alice = () => s.client(s.tokens.alice);

  const checkpointDir = (cwd: string): string => join(s.storage!.root, '.checkpoints', cwd.split('/').at(-1)!);

  /** One user turn of one bash tool (support/tool-turn.ts); answers which checkpoints the workspace had when the tool job arrived. */
  const turn = async (id: string, cwd: string, script: string): Promise<{ checkpointsAtTool: string[] }> => ({
    checkpointsAtTool:
      (await toolTurn(s, s.tokens.alice!, id, cwd, script, 'ok', () =>
        existsSync(checkpointDir(cwd)) ? readdirSync(checkpointDir(cwd)).filter((n) => !n.startsWith('.')) : [],
      )) ?? [],
  });

  const messagesOf = async (id: string) => (await alice().getConversation({ conversationId: id })).messages;

  // Rewinds of the files, the history and both (refused while busy; audited; idempotent); the fork
  // with files makes two lines that never see each other's files.
  it('checkpoints each turn before its first tool, diffs, rewinds files and history, forks with files, frees on delete', async () => {
    const created = (await alice().createConversation({})).conversation!;
    const id = created.id;
    const cwd = created.cwd;
    const prefix = `c${id.replace(/-/g, '')}-`;

    // Turn 1 (message 1): a.txt v1.
    const t1 = await turn(id, cwd, 'printf "v1\\n" > a.txt');
    expect(t1.checkpointsAtTool).toEqual([`${prefix}1`]);
    const endOfTurn1 = (await messagesOf(id)).at(-1)!.sequence;
    // Turn 2: a.txt v2, b.txt.
    const t2 = await turn(id, cwd, 'printf "v2\\n" > a.txt; printf b > b.txt; chmod 600 b.txt');
    expect(t2.checkpointsAtTool).toContain(`${prefix}${Number(endOfTurn1) + 1}`);
    // The checkpoint of turn 2 holds turn 1's files.
    expect(readFileSync(join(checkpointDir(cwd), `${prefix}${Number(endOfTurn1) + 1}`, 'a.txt'), 'utf8')).toBe('v1\n');

    const listed = await checkpoints.listCheckpoints({ conversationId: id });
    expect(listed.checkpoints.map((c) => Number(c.turnMessage))).toEqual([1, Number(endOfTurn1) + 1]);

    // What changed since turn 1 ended: from message endOfTurn1 to now.
    const diff = await checkpoints.getWorkspaceDiff({ conversationId: id, from: endOfTurn1, to: 0n });
    const byPath = Object.fromEntries(diff.changes.map((c) => [c.path, c]));
    expect(byPath['a.txt']!.kind).toBe(FileChangeKind.MODIFIED);
    expect(byPath['a.txt']!.unifiedDiff).toContain('-v1');
    expect(byPath['a.txt']!.unifiedDiff).toContain('+v2');
    expect(byPath['b.txt']!.kind).toBe(FileChangeKind.ADDED);
    expect(byPath['b.txt']!.newMode).toBe(0o600);

    // A fork with files at the end of turn 1 gets its own workspace holding turn 1's files.
    const fork = (await alice().forkConversation({ conversationId: id, atMessage: endOfTurn1, withFiles: true })).conversation!;
    expect(fork.cwd).not.toBe(cwd);
    expect(readFileSync(join(fork.cwd, 'a.txt'), 'utf8')).toBe('v1\n');
    expect(existsSync(join(fork.cwd, 'b.txt'))).toBe(false);

    // Rewind (both) to the end of turn 1, with a request id; a retry answers the same.
    const messagesBefore = (await messagesOf(id)).length;
    const rewound = await checkpoints.rewindConversation({
      conversationId: id,
      atMessage: endOfTurn1,
      scope: RewindScope.BOTH,
      requestId: 'rw-1',
    });
    expect(Number(rewound.filesFromTurn)).toBe(Number(endOfTurn1) + 1);
    expect(rewound.messagesRemoved).toBe(messagesBefore - Number(endOfTurn1));
    expect(readFileSync(join(cwd, 'a.txt'), 'utf8')).toBe('v1\n');
    expect(existsSync(join(cwd, 'b.txt'))).toBe(false);
    expect((await messagesOf(id)).at(-1)!.sequence).toBe(endOfTurn1);
    asOwner(cwd, 'printf "changed after\\n" > a.txt');
    const again = await checkpoints.rewindConversation({
      conversationId: id,
      atMessage: endOfTurn1,
      scope: RewindScope.BOTH,
      requestId: 'rw-1',
    });
    expect(again).toEqual(rewound);
    expect(readFileSync(join(cwd, 'a.txt'), 'utf8')).toBe('changed after\n'); // the retry did nothing again
    const audit = await pool.query(`SELECT details FROM audit_events WHERE action = 'conversation_rewound' AND conversation_id = $1`, [id]);
    expect(audit.rows).toHaveLength(1);
    expect(audit.rows[0].details).toMatchObject({ at_message: Number(endOfTurn1), scope: 'both' });

    // Files only, to before turn 1: the empty workspace; the history stays.
    const filesOnly = await checkpoints.rewindConversation({ conversationId: id, atMessage: 0n, scope: RewindScope.FILES });
    expect(filesOnly).toMatchObject({ filesFromTurn: 1n, messagesRemoved: 0 });
    expect(readdirSync(cwd)).toEqual([]);
    expect((await messagesOf(id)).at(-1)!.sequence).toBe(endOfTurn1);

    // The conversation goes on after a rewind, and the fork's files and the source's never meet.
    await turn(id, cwd, 'printf source > s.txt');
    await turn(fork.id, fork.cwd, 'printf fork > f.txt; printf "fork\\n" > a.txt');
    expect(existsSync(join(cwd, 'f.txt'))).toBe(false);
    expect(existsSync(join(fork.cwd, 's.txt'))).toBe(false);
    expect(readFileSync(join(fork.cwd, 'a.txt'), 'utf8')).toBe('fork\n');

    // Refused inside a turn whose tools ran later, and while busy.
    const inside = await failure(
      checkpoints.rewindConversation({ conversationId: id, atMessage: endOfTurn1 + 2n, scope: RewindScope.FILES }),
    );
    expect(inside.code).toBe(Code.FailedPrecondition);
    expect(inside.rawMessage).toMatch(/captured only at the start of a turn: rewind to message/);
    await alice().sendMessage({ conversationId: id, text: 'busy now' });
    const busy = await failure(checkpoints.rewindConversation({ conversationId: id, atMessage: 1n, scope: RewindScope.BOTH }));
    expect(busy.code).toBe(Code.FailedPrecondition);
    expect(busy.rawMessage).toMatch(/busy/);
    await alice().cancel({ conversationId: id });
    await s.waitFor(
      'idle',
      async () => (await alice().getConversation({ conversationId: id })).conversation!.state?.kind === StateKind.IDLE,
    );

    // Deleting the conversation frees its checkpoints (the fork's stay with the fork).
    expect(readdirSync(checkpointDir(cwd)).some((n) => n.startsWith(prefix))).toBe(true);
    await alice().deleteConversation({ conversationId: id });
    expect(readdirSync(checkpointDir(cwd)).filter((n) => n.startsWith(prefix))).toEqual([]);
    expect((await pool.query('SELECT 1 FROM conversation_checkpoints WHERE conversation_id = $1', [id])).rowCount).toBe(0);
    expect(readdirSync(checkpointDir(fork.cwd)).filter((n) => n.startsWith(`c${fork.id.replace(/-/g, '')}-`))).toHaveLength(1);
  }, 120_000);
});
