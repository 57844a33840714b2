/**
 * What a rewind does to the others (docs/workspaces.md, "Checkpoints"): a WatchConversation stream
 * open during RewindConversation gets the durable `history_rewound` event, in order, and goes on
 * with the messages after the cut numbered from it again; a files-only rewind sends none. Deleting
 * the user removes their checkpoint records. Needs root and btrfs-progs.
 */
import { afterAll, beforeAll, expect, it } from '@jest/globals';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import pg from 'pg';
import { Code, ConnectError, createClient, type Client } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { AdminService, RewindScope, type CheckpointService, type ConversationEvent } from '@bedrock/contracts';
import { startSystem, type System } from './support/system.ts';
import { checkpointClient, describeBtrfs as describeBtrfsIf, toolTurn } from './support/tool-turn.ts';

const describeBtrfs = describeBtrfsIf('checkpoints-watch.test.ts');

// A real web-bff, conversation service and tool-runner on a loop-mounted btrfs image; the test
// plays the llm-gateway and the tools (support/tool-turn.ts).
describeBtrfs('a rewind reaches watchers; deleting a user deletes checkpoint records', () => {
  let s: System;
  let pool: pg.Pool;
  let checkpoints: Client<typeof CheckpointService>;

  beforeAll(async () => {
    s = await startSystem({ label: 'ckpt_watch', workspaceStorage: true, workspaceImage: true, bff: { auth: { admins: ['alice'] } } });
    pool = new pg.Pool({ connectionString: s.db.url, max: 1 });
    checkpoints = checkpointClient(s, s.tokens.bob!);
  }, 120_000);
  afterAll(async () => {
    await pool?.end();
    await s?.close();
  }, 60_000);

  const bob = () => s.client(s.tokens.bob);
  const turn = (id: string, cwd: string, script: string, answer: string) => toolTurn(s, s.tokens.bob!, id, cwd, script, answer);

  // The watch goes on without a reconnect; DeleteUser removes the checkpoint records with the snapshots.
  it('an open watch gets history_rewound at a history rewind and goes on; DeleteUser removes checkpoint rows', async () => {
    const created = (await bob().createConversation({})).conversation!;
    const id = created.id;
    const cwd = created.cwd;
    await turn(id, cwd, 'printf one > a.txt', 'first answer');
    const endOfTurn1 = (await bob().getConversation({ conversationId: id })).messages.at(-1)!.sequence;
    await turn(id, cwd, 'printf two > a.txt', 'second answer');
    const lastBefore = (await bob().getConversation({ conversationId: id })).messages.at(-1)!.sequence;
    expect(lastBefore).toBeGreaterThan(endOfTurn1);

    // A watcher, open from before the rewinds to the end of the test (one stream: it never reconnects).
    const events: ConversationEvent[] = [];
    let ended: unknown = 'open';
    const abort = new AbortController();
    const watching = (async () => {
      try {
        for await (const res of bob().watchConversation({ conversationId: id }, { signal: abort.signal })) events.push(res.event!);
        ended = 'ended';
      } catch (err) {
        ended = ConnectError.from(err).code === Code.Canceled ? 'open' : err;
      }
    })();
    await s.waitFor('the snapshot', () => events[0]?.kind.case === 'snapshot');
    const snapshot = events[0]!.kind.value as { messages: { sequence: bigint }[] };
    expect(snapshot.messages.at(-1)!.sequence).toBe(lastBefore);

    // Files only: the history stays, so nothing is announced.
    await checkpoints.rewindConversation({ conversationId: id, atMessage: endOfTurn1, scope: RewindScope.FILES });
    // History: the watcher is told where the history now ends, after everything before it.
    const rewound = await checkpoints.rewindConversation({ conversationId: id, atMessage: endOfTurn1, scope: RewindScope.HISTORY });
    expect(rewound.messagesRemoved).toBe(Number(lastBefore - endOfTurn1));
    const cut = await s.waitFor('history_rewound', () => events.find((e) => e.kind.case === 'historyRewound'));
    expect(cut.kind.value).toMatchObject({ through: endOfTurn1 });
    expect(events.filter((e) => e.kind.case === 'historyRewound')).toHaveLength(1);
    const durable = events.filter((e) => e.deltaIndex === 0 && e.kind.case !== 'heartbeat');
    expect(durable.at(-1)).toBe(cut);
    expect(cut.sequence).toBe(events[0]!.sequence + 1n); // the next notification after the snapshot: no gap, nothing before it

    // The conversation goes on; the watcher (the same stream) gets the new messages, numbered from the cut.
    await turn(id, cwd, 'printf three > a.txt', 'third answer');
    const after = events.slice(events.indexOf(cut) + 1).filter((e) => e.kind.case === 'messagePersisted');
    expect(after.length).toBeGreaterThan(0);
    expect((after[0]!.kind.value as { message: { sequence: bigint } }).message.sequence).toBe(endOfTurn1 + 1n);
    expect(ended).toBe('open');

    // A watcher that starts later, resuming from before the cut, gets it too (it is durable).
    const resumed: ConversationEvent[] = [];
    for await (const res of bob().watchConversation({ conversationId: id, afterSequence: events[0]!.sequence })) {
      resumed.push(res.event!);
      if (res.event!.kind.case === 'historyRewound') break;
    }
    expect(resumed.at(-1)!.kind).toMatchObject({ case: 'historyRewound', value: { through: endOfTurn1 } });
    abort.abort();
    await watching;

    // Deleting the user: their checkpoints' records go with the snapshots and the workspaces.
    const rows = async () =>
      (
        await pool.query('SELECT 1 FROM conversation_checkpoints WHERE conversation_id = $1 OR workspace_id = $2', [
          id,
          created.workspaceId,
        ])
      ).rowCount;
    expect(await rows()).toBeGreaterThan(0);
    const checkpointDir = join(s.storage!.root, '.checkpoints', cwd.split('/').at(-1)!);
    expect(readdirSync(checkpointDir).length).toBeGreaterThan(0);
    const admin = createClient(
      AdminService,
      createConnectTransport({
        baseUrl: s.bff.httpUrl,
        httpVersion: '1.1',
        interceptors: [
          (next) => (req) => {
            req.header.set('authorization', `Bearer ${s.tokens.alice}`);
            return next(req);
          },
        ],
      }),
    );
    await admin.deleteUser({ userId: 'bob' });
    expect(await rows()).toBe(0);
    expect(existsSync(checkpointDir)).toBe(false);
  }, 180_000);
});
