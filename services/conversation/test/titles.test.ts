/**
 * Conversations people can find: a title from the first user message as it is accepted,
 * RenameConversation (checked, owner only, never replaced by the automatic title), watchers
 * told with `title_changed`, ListConversations' `query` over titles with paging, and a
 * conversation's sub-agents in its details. Migration 006 gives older conversations titles.
 */
import { afterAll, beforeAll, describe, expect, it } from '@jest/globals';
import pg from 'pg';
import { StateKind, StopReason, type ConversationEvent } from '@bedrock/contracts';
import { createTestDatabase } from '@bedrock/testkit/database';
import { loadMigrations, migrate } from '../src/db/migrate.ts';
import { text, toolUse } from './support/blocks.ts';
import { Code, rpcError, startHarness, type Harness } from './support/harness.ts';

let h: Harness;
beforeAll(async () => {
  h = await startHarness({ label: 'titles' });
});
afterAll(async () => {
  await h?.close();
});

const titlesOf = (events: ConversationEvent[]) => events.flatMap((e) => (e.kind.case === 'titleChanged' ? [e.kind.value.title] : []));

async function titleRow(id: string): Promise<{ title: string | null; title_source: string | null }> {
  const { rows } = await h.pool.query('SELECT title, title_source FROM conversations WHERE id = $1', [id]);
  return rows[0];
}

/** Every durable notification has the next sequence: no gap, no repeat (a rename writes into the same stream). */
function expectConsecutive(events: ConversationEvent[]): void {
  const durable = events.filter((e) => e.deltaIndex === 0).map((e) => Number(e.sequence));
  expect(durable).toEqual(durable.map((_, i) => i + 1));
}

describe('the automatic title', () => {
  it('comes from the first user message as it is accepted, is announced after it, and later messages keep it', async () => {
    const c = h.client();
    const created = (await c.createConversation({ cwd: '/tmp' })).conversation!;
    expect(created.title).toBe('');
    await c.sendMessage({ conversationId: created.id, text: '## Fix **the** login `bug`\n\nIt fails on Safari.' });
    // At once: before the model answers.
    expect((await h.get(created.id)).conversation!.title).toBe('Fix the login bug');
    expect(await titleRow(created.id)).toEqual({ title: 'Fix the login bug', title_source: 'message' });

    await h.respond(await h.llmJob(created.id), { content: [text('Fixed.')] });
    await h.waitState(created.id, StateKind.IDLE);
    await c.sendMessage({ conversationId: created.id, text: 'Now something else entirely' });
    await h.respond(await h.llmJob(created.id, 1), { content: [text('Done.')] });
    await h.waitState(created.id, StateKind.IDLE);
    expect((await h.get(created.id)).conversation!.title).toBe('Fix the login bug');

    const events = await h.notifications(created.id);
    expect(titlesOf(events)).toEqual(['Fix the login bug']);
    const kinds = events.map((e) => e.kind.case);
    // Right after the user message that gave it.
    expect(kinds.slice(0, 2)).toEqual(['messagePersisted', 'titleChanged']);
    expectConsecutive(events);
    const listed = (await c.listConversations({})).conversations.find((x) => x.id === created.id);
    expect(listed?.title).toBe('Fix the login bug');
  });

  it('is cut at a word boundary; a message without words leaves the title to the next one', async () => {
    const c = h.client();
    const id = await h.createConversation();
    await c.sendMessage({ conversationId: id, text: '```\n```' });
    expect((await h.get(id)).conversation!.title).toBe('');
    await h.respond(await h.llmJob(id), { content: [text('?')] });
    await h.waitState(id, StateKind.IDLE);
    await c.sendMessage({
      conversationId: id,
      text: 'Please look at the failing integration tests in the payments service and tell me why',
    });
    expect((await h.get(id)).conversation!.title).toBe('Please look at the failing integration tests in the payments…');
  });
});

describe('RenameConversation', () => {
  it('sets the title, tells watchers, and the first message does not replace it', async () => {
    const c = h.client();
    const id = await h.createConversation();
    const renamed = (await c.renameConversation({ conversationId: id, title: '  Release notes 2.0  ' })).conversation!;
    expect(renamed.title).toBe('Release notes 2.0');
    expect(await titleRow(id)).toEqual({ title: 'Release notes 2.0', title_source: 'user' });

    await c.sendMessage({ conversationId: id, text: 'Write the release notes' });
    await h.respond(await h.llmJob(id), { content: [text('Here they are.')] });
    await h.waitState(id, StateKind.IDLE);
    expect((await h.get(id)).conversation!.title).toBe('Release notes 2.0');

    // Renamed again after messages: the applier's remembered row is stale, its next write misses and is decided again.
    await c.renameConversation({ conversationId: id, title: 'Notes for 2.0' });
    await c.sendMessage({ conversationId: id, text: 'Shorter please' });
    await h.respond(await h.llmJob(id, 1), { content: [text('Shorter.')] });
    await h.waitState(id, StateKind.IDLE);
    // The same title again changes nothing and announces nothing.
    await c.renameConversation({ conversationId: id, title: 'Notes for 2.0' });

    const got = await h.get(id);
    expect(got.conversation!.title).toBe('Notes for 2.0');
    const events = await h.notifications(id);
    expect(titlesOf(events)).toEqual(['Release notes 2.0', 'Notes for 2.0']);
    expectConsecutive(events);
    expect(got.sequence).toBe(events[events.length - 1]!.sequence);
  });

  it('renames while the agent is busy, and the turn goes on', async () => {
    const c = h.client();
    const id = await h.createConversation();
    await c.sendMessage({ conversationId: id, text: 'long task' });
    const job = await h.llmJob(id);
    await c.renameConversation({ conversationId: id, title: 'Renamed mid-turn' });
    await h.respond(job, { content: [text('done')] });
    await h.waitState(id, StateKind.IDLE);
    const events = await h.notifications(id);
    expect(titlesOf(events)).toEqual(['long task', 'Renamed mid-turn']);
    expectConsecutive(events);
    expect((await h.get(id)).conversation!.title).toBe('Renamed mid-turn');
  });

  it('refuses a bad title with INVALID_ARGUMENT and the reason, storing nothing', async () => {
    const c = h.client();
    const id = await h.createConversation();
    await c.renameConversation({ conversationId: id, title: 'Kept' });
    const cases: [string, string][] = [
      ['   ', 'title is empty: give 1 to 200 characters'],
      ['x'.repeat(201), 'title is 201 characters; the limit is 200: shorten it'],
      [
        'two\nlines',
        'title contains a control character (U+000A at character 4): give one line of plain text, without line breaks or tabs',
      ],
    ];
    for (const [title, message] of cases) {
      const err = await rpcError(c.renameConversation({ conversationId: id, title }));
      expect([err.code, err.rawMessage]).toEqual([Code.InvalidArgument, message]);
    }
    expect(await titleRow(id)).toEqual({ title: 'Kept', title_source: 'user' });
    expect(titlesOf(await h.notifications(id))).toEqual(['Kept']);
  });

  it('is NOT_FOUND for an unknown conversation and for another user’s, which keeps its title', async () => {
    const id = await h.createConversation('alice');
    await h.client('alice').renameConversation({ conversationId: id, title: 'Mine' });
    const foreign = await rpcError(h.client('bob').renameConversation({ conversationId: id, title: 'Stolen' }));
    expect([foreign.code, foreign.rawMessage]).toEqual([Code.NotFound, `conversation ${id} not found`]);
    const unknown = await rpcError(h.client('alice').renameConversation({ conversationId: 'nope', title: 'x' }));
    expect(unknown.code).toBe(Code.NotFound);
    expect(await titleRow(id)).toEqual({ title: 'Mine', title_source: 'user' });
  });
});

describe('search', () => {
  it('finds titles containing the text, ignoring case, page by page, only among the user’s top-level conversations', async () => {
    const user = 'searcher';
    const c = h.client(user);
    const titles = ['Fix the LOGIN bug', 'Design the login page', 'Write release notes', '100% coverage_plan', 'Login flow review'];
    const ids: string[] = [];
    for (const title of titles) {
      const id = await h.createConversation(user);
      await c.renameConversation({ conversationId: id, title });
      ids.push(id);
    }
    // Another user's conversation with a matching title is never found.
    const other = await h.createConversation('someone-else');
    await h.client('someone-else').renameConversation({ conversationId: other, title: 'login too' });

    const all = await c.listConversations({ query: 'login' });
    // Newest first, as without a query.
    expect(all.conversations.map((x) => x.title)).toEqual(['Login flow review', 'Design the login page', 'Fix the LOGIN bug']);
    expect(all.nextPageToken).toBe('');
    expect((await c.listConversations({ query: '  LoGiN  ' })).conversations).toHaveLength(3);

    // Pages: two, then one, with the same query.
    const first = await c.listConversations({ query: 'login', pageSize: 2 });
    expect(first.conversations.map((x) => x.title)).toEqual(['Login flow review', 'Design the login page']);
    expect(first.nextPageToken).not.toBe('');
    const second = await c.listConversations({ query: 'login', pageSize: 2, pageToken: first.nextPageToken });
    expect(second.conversations.map((x) => x.title)).toEqual(['Fix the LOGIN bug']);
    expect(second.nextPageToken).toBe('');

    // LIKE's wildcards are plain characters.
    expect((await c.listConversations({ query: '%' })).conversations.map((x) => x.title)).toEqual(['100% coverage_plan']);
    expect((await c.listConversations({ query: 'e_p' })).conversations.map((x) => x.title)).toEqual(['100% coverage_plan']);
    expect((await c.listConversations({ query: 'nothing like it' })).conversations).toEqual([]);
    // Blank: no filter.
    expect((await c.listConversations({ query: '   ' })).conversations).toHaveLength(titles.length);

    const long = await rpcError(c.listConversations({ query: 'q'.repeat(201) }));
    expect([long.code, long.rawMessage]).toEqual([
      Code.InvalidArgument,
      'query is 201 characters; titles have at most 200, so search for a part of one',
    ]);
  });

  it('is served by the trigram index for a user with very many conversations', async () => {
    const { rows } = await h.pool.query(`SELECT indexdef FROM pg_indexes WHERE indexname = 'conversations_title_trgm_idx'`);
    expect(rows[0]?.indexdef).toMatch(/USING gin \(owner_id, title gin_trgm_ops\) WHERE \(parent_id IS NULL\)/);
    const client = await h.pool.connect();
    try {
      await client.query('BEGIN');
      // One user with many conversations (rolled back): the plan the list query gets there.
      await client.query(
        `INSERT INTO conversations (id, owner_id, slug, cwd, model, context_window, mode, sandbox_available, user_initiated, state_kind, state, title)
         SELECT 'many-' || n, 'many', 'many-' || n, '/tmp', 'm', 1000, 'restricted', true, true, 'idle', '{}', 'conversation number ' || n
           FROM generate_series(1, 20000) AS n`,
      );
      await client.query('ANALYZE conversations');
      // This database holds almost nobody else, so reading the table would do: compare the two indexes.
      await client.query('SET LOCAL enable_seqscan = off');
      const plan = await client.query(
        `EXPLAIN SELECT * FROM conversations WHERE owner_id = 'many' AND parent_id IS NULL AND NOT archived AND title ILIKE '%number 4242%'
          ORDER BY created_at DESC, id DESC LIMIT 51`,
      );
      expect(plan.rows.map((r: { 'QUERY PLAN': string }) => r['QUERY PLAN']).join('\n')).toMatch(
        /Bitmap Index Scan on conversations_title_trgm_idx/,
      );
      await client.query('ROLLBACK');
    } finally {
      client.release();
    }
  });
});

describe('sub-agents', () => {
  it('are titled by their task, listed in their parent’s details and snapshot, not among the user’s conversations', async () => {
    const c = h.client();
    const id = await h.createConversation();
    await c.sendMessage({ conversationId: id, text: 'split the work' });
    await h.respond(await h.llmJob(id), {
      stopReason: StopReason.TOOL_USE,
      content: [
        text('Spawning.'),
        toolUse('sp', 'spawn_agents', { tasks: [{ task: 'Find the config loader' }, { task: 'Read the **docs**' }] }),
      ],
    });
    const children = [`${id}--sp--0`, `${id}--sp--1`];
    await Promise.all(children.map((child) => h.llmJob(child)));

    const details = await h.get(id);
    // Oldest first: the children are created in parallel, so in either order.
    const byId = [...details.subAgents].sort((a, b) => a.id.localeCompare(b.id));
    expect(byId.map((s) => [s.id, s.title, s.parentId])).toEqual([
      [children[0], 'Find the config loader', id],
      [children[1], 'Read the docs', id],
    ]);
    expect(details.subAgents.every((s) => s.state?.kind === StateKind.LLM_REQUESTING)).toBe(true);
    expect(details.moreSubAgents).toBe(false);

    // A sub-agent opens like any conversation; its details name its parent.
    const child = await h.get(children[0]!);
    expect(child.conversation).toMatchObject({ id: children[0], parentId: id, title: 'Find the config loader', userInitiated: false });
    expect(child.subAgents).toEqual([]);

    // The watch's snapshot carries them too.
    const abort = new AbortController();
    let snapshotIds: string[] = [];
    for await (const res of c.watchConversation({ conversationId: id }, { signal: abort.signal })) {
      if (res.event?.kind.case === 'snapshot') snapshotIds = res.event.kind.value.subAgents.map((s) => s.id);
      abort.abort();
      break;
    }
    expect(snapshotIds.sort()).toEqual(children);

    // Only top-level conversations are listed (searched too); sub-agents under their parent.
    const top = (await c.listConversations({ pageSize: 200 })).conversations.map((x) => x.id);
    expect(top).toContain(id);
    expect(top).not.toContain(children[0]);
    expect((await c.listConversations({ query: 'config loader' })).conversations).toEqual([]);
    expect((await c.listConversations({ parentId: id, query: 'CONFIG' })).conversations.map((x) => x.id)).toEqual([children[0]]);
    // Not someone else's to open.
    expect((await rpcError(h.client('bob').getConversation({ conversationId: children[0]! }))).code).toBe(Code.NotFound);
  });
});

describe('migration 006', () => {
  it('titles the conversations that existed before it from their first user message', async () => {
    const db = await createTestDatabase('titles_migration');
    const pool = new pg.Pool({ connectionString: db.url, max: 2 });
    try {
      const migrations = loadMigrations();
      await migrate(
        pool,
        migrations.filter((m) => m.version < 6),
      );
      const insert = async (id: string, messages: { type: string; content: unknown }[]) => {
        await pool.query(
          `INSERT INTO conversations (id, owner_id, slug, cwd, model, context_window, mode, sandbox_available, user_initiated, state_kind, state)
           VALUES ($1, 'alice', $1, '/tmp', 'm', 1000, 'restricted', true, true, 'idle', '{}')`,
          [id],
        );
        for (const [i, m] of messages.entries()) {
          await pool.query(
            `INSERT INTO messages (id, conversation_id, sequence, message_type, actor_kind, content) VALUES ($1, $2, $3, $4, 'human', $5)`,
            [`${id}/m/${i + 1}`, id, i + 1, m.type, JSON.stringify(m.content)],
          );
        }
      };
      await insert('a', [
        { type: 'system', content: [{ type: 'text', text: 'a summary' }] },
        { type: 'user', content: [{ type: 'image' }, { type: 'text', text: '\n# Make `build` **faster**\nmore' }] },
        { type: 'user', content: [{ type: 'text', text: 'second' }] },
      ]);
      await insert('b', [
        { type: 'user', content: [{ type: 'text', text: 'Please look at the failing integration tests in the payments service now' }] },
      ]);
      await insert('c', []);
      expect(
        await migrate(
          pool,
          migrations.filter((m) => m.version <= 6),
        ),
      ).toEqual(['006_conversation_titles.sql']);
      const { rows } = await pool.query('SELECT id, title, title_source FROM conversations ORDER BY id');
      expect(rows).toEqual([
        { id: 'a', title: 'Make build faster', title_source: 'message' },
        { id: 'b', title: 'Please look at the failing integration tests in the payments…', title_source: 'message' },
        { id: 'c', title: null, title_source: null },
      ]);
    } finally {
      await pool.end();
      await db.drop();
    }
  });
});
