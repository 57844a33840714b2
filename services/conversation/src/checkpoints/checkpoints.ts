/**
 * Checkpoints of conversations' workspaces (docs/workspaces.md, "Checkpoints"): the records
 * here (table conversation_checkpoints, migration 018), the snapshots on the tool-runners'
 * storage (WorkspaceStorageService: CreateCheckpoint, RestoreCheckpoint, GetCheckpointDiff).
 * The applier takes one before the first tool of each user turn (`beforeTools`); `rewind`,
 * `diff` and `forkFiles` read them back.
 */
import { randomBytes } from 'node:crypto';
import { Code, ConnectError } from '@connectrpc/connect';
import { isResting, rejectionError } from '@bedrock/contracts';
import type { GetCheckpointDiffResponse } from '@bedrock/contracts';
import type { Logger } from '@bedrock/platform/server';
import type { Pool, PoolClient } from 'pg';
import { chooseForkPoint } from '../forks.ts';
import type { AuditActor } from '../store/audit-store.ts';
import { clientDetails } from '../store/audit-store.ts';
import { notificationRow } from '../mapping/effects-to-outbox.ts';
import type { OutboxPublisher } from '../outbox/publisher.ts';
import { insertAuditRows } from '../store/audit-store.ts';
import type { StoredOutboxRow } from '../store/outbox-row.ts';
import type { ConversationRecord, ConversationStore, MessageRow } from '../store/conversation-store.ts';
import { storageFailure, type WorkspaceStorage } from '../workspaces/storage-client.ts';
import type { Workspaces } from '../workspaces/workspaces.ts';
import { checkpointIdOf, checkpointPrefixOf, filesPoint } from './points.ts';

export interface CheckpointSettings {
  /** Checkpoints kept per workspace (0: no limit). */
  readonly maxCount: number;
  /** Bytes the checkpoints of a workspace may hold beyond the workspace itself (0: no limit). */
  readonly maxBytes: number;
}

export type RewindScope = 'files' | 'history' | 'both';

export interface RewindOutcome {
  /** The checkpoint's turn the files came from; 0 when the files were not touched. */
  readonly filesFromTurn: number;
  readonly messagesRemoved: number;
}

export interface CheckpointRow {
  readonly turn: number;
  readonly workspaceId: string;
  readonly checkpointId: string;
  readonly createdAt: Date;
}

export interface Checkpoints {
  /**
   * Takes the turn's checkpoint if it has none yet: the storage snapshots the workspace
   * (read-only, copy-on-write) and it is recorded. The applier awaits it before the first tool of
   * each user turn, before the tool jobs are written, so the checkpoint happens-before every tool
   * of the turn. Never throws: a storage that cannot (not btrfs, or down) costs the turn nothing
   * but the checkpoint, and the failure is logged.
   */
  beforeTools(record: ConversationRecord): Promise<void>;
  list(record: ConversationRecord): Promise<CheckpointRow[]>;
  /**
   * Puts the files back from a checkpoint (points.ts says which) and/or cuts the history with
   * ForkConversation's rules; refused while the conversation is busy, audited, idempotent with a
   * request id. `commit` runs in the transaction that cuts the history and writes the audit row
   * (the caller stores its request outcome there).
   */
  rewind(
    record: ConversationRecord,
    at: number,
    scope: RewindScope,
    actor: AuditActor | undefined,
    commit?: (client: PoolClient, outcome: RewindOutcome) => Promise<void>,
  ): Promise<RewindOutcome>;
  /** Compares the files at two points (message sequences, 0 for now). */
  diff(record: ConversationRecord, from: number, to: number): Promise<GetCheckpointDiffResponse>;
  /** A new workspace for a fork through message `at` of `record`: its files as at that message. */
  forkFiles(record: ConversationRecord, at: number): Promise<{ id: string; name: string; path: string }>;
  /** Frees the checkpoints of deleted conversations. */
  forget(conversationIds: readonly string[]): Promise<void>;
}

export interface CheckpointsOptions {
  readonly pool: Pool;
  readonly store: ConversationStore;
  readonly storage: WorkspaceStorage | undefined;
  readonly workspaces: Workspaces;
  readonly settings: CheckpointSettings;
  readonly logger: Logger;
  /** Publishes the durable `history_rewound` notification a history rewind writes (without it: the outbox relay does, later). */
  readonly publisher?: Pick<OutboxPublisher, 'publishCommitted'>;
}

export function createCheckpoints(options: CheckpointsOptions): Checkpoints {
  const { pool, logger } = options;
  /** Until then, a storage that said it cannot take checkpoints is not asked again (ms). */
  let unavailableUntil = 0;
  /** Whether the storage's "cannot take checkpoints" was logged at warn already. */
  let cannotSaid = false;

  function requireStorage(record: ConversationRecord): { storage: WorkspaceStorage; workspaceId: string } {
    if (!record.workspace)
      throw new ConnectError(
        `conversation ${record.id} runs in a host directory, not a workspace: it has no checkpoints (only conversations in workspaces do)`,
        Code.FailedPrecondition,
      );
    if (!options.storage)
      throw new ConnectError('this deployment has no workspace storage (BEDROCK_WORKSPACE_STORAGE_URL is unset)', Code.FailedPrecondition);
    return { storage: options.storage, workspaceId: record.workspace.id };
  }

  /**
   * Why a conversation with no checkpoint at all has none, when the reason is the storage: not on
   * btrfs, so none is ever taken (then "never taken, or removed by retention" would mislead).
   */
  async function storageCannot(storage: WorkspaceStorage, what: string): Promise<ConnectError | undefined> {
    const info = await storage.info().catch(() => undefined);
    if (!info || info.quotaMechanism === 'btrfs') return undefined;
    return new ConnectError(
      `${what}: checkpoints need the workspace root on btrfs with quotas, and this server keeps workspaces in plain directories (${info.root}), so it takes none. Put BEDROCK_WORKSPACE_ROOT on btrfs, or set BEDROCK_WORKSPACE_IMAGE to have the runner loop-mount a btrfs image there (docs/workspaces.md, "Checkpoints")`,
      Code.FailedPrecondition,
    );
  }

  async function quotaOf(workspaceId: string): Promise<bigint> {
    const { rows } = await pool.query<{ quota_bytes: string }>('SELECT quota_bytes FROM workspaces WHERE id = $1', [workspaceId]);
    return BigInt(rows[0]?.quota_bytes ?? 0);
  }

  async function rows(conversationId: string): Promise<CheckpointRow[]> {
    const { rows } = await pool.query<{ turn_message: string; workspace_id: string; checkpoint_id: string; created_at: Date }>(
      'SELECT turn_message, workspace_id, checkpoint_id, created_at FROM conversation_checkpoints WHERE conversation_id = $1 ORDER BY turn_message',
      [conversationId],
    );
    return rows.map((r) => ({
      turn: Number(r.turn_message),
      workspaceId: r.workspace_id,
      checkpointId: r.checkpoint_id,
      createdAt: r.created_at,
    }));
  }

  async function forgetRemoved(workspaceId: string, ids: readonly string[]): Promise<void> {
    if (ids.length === 0) return;
    await pool.query('DELETE FROM conversation_checkpoints WHERE workspace_id = $1 AND checkpoint_id = ANY($2::text[])', [
      workspaceId,
      ids,
    ]);
  }

  async function messagesOf(record: ConversationRecord): Promise<MessageRow[]> {
    const snapshot = await options.store.snapshot(record.id);
    if (!snapshot) throw new ConnectError(`conversation ${record.id} not found`, Code.NotFound);
    return snapshot.messages;
  }

  /** The storage's id of the files as at message `at` ('' for the live workspace). */
  async function sideOf(record: ConversationRecord, messages: readonly MessageRow[], at: number): Promise<string> {
    if (at === 0) return '';
    const all = await rows(record.id);
    const point = filesPoint(
      messages,
      all.map((r) => r.turn),
      at,
    );
    if (point.kind === 'none')
      throw new ConnectError(`cannot show the files as at message ${at}: ${point.problem}`, Code.FailedPrecondition);
    return point.kind === 'now' ? '' : all.find((r) => r.turn === point.turn)!.checkpointId;
  }

  function busy(record: ConversationRecord, what: string): ConnectError {
    return rejectionError({
      code: 'conversation_busy',
      message: `conversation ${record.id} is busy (${record.state.phase.kind.replaceAll('_', ' ')}): cancel it or wait until it is idle, then ${what}`,
    });
  }

  return {
    async beforeTools(record) {
      if (!record.workspace || record.parentId || !options.storage || Date.now() < unavailableUntil) return;
      const workspaceId = record.workspace.id;
      try {
        const { rows: turns } = await pool.query<{ turn: string | null }>(
          `SELECT max(sequence) AS turn FROM messages WHERE conversation_id = $1 AND message_type = 'user'`,
          [record.id],
        );
        const turn = turns[0]?.turn === null || turns[0]?.turn === undefined ? undefined : Number(turns[0].turn);
        if (turn === undefined) return;
        const { rowCount } = await pool.query('SELECT 1 FROM conversation_checkpoints WHERE conversation_id = $1 AND turn_message = $2', [
          record.id,
          turn,
        ]);
        if (rowCount) return; // taken before this turn's first tool already
        const checkpointId = checkpointIdOf(record.id, turn);
        const started = Date.now();
        const made = await options.storage.createCheckpoint({
          workspaceId,
          checkpointId,
          quotaBytes: await quotaOf(workspaceId),
          maxCount: options.settings.maxCount,
          maxBytes: BigInt(options.settings.maxBytes),
        });
        await pool.query(
          `INSERT INTO conversation_checkpoints (conversation_id, turn_message, workspace_id, checkpoint_id)
           VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`,
          [record.id, turn, workspaceId, checkpointId],
        );
        await forgetRemoved(workspaceId, made.removedIds);
        logger.debug(
          { conversation_id: record.id, turn, checkpoint_id: checkpointId, ms: Date.now() - started, removed: made.removedIds.length },
          'checkpoint taken',
        );
      } catch (err) {
        const ce = ConnectError.from(err);
        const fields = { conversation_id: record.id, workspace_id: workspaceId, err: ce.rawMessage };
        if (ce.code !== Code.FailedPrecondition) logger.warn(fields, 'no checkpoint for this turn');
        else {
          // A storage that cannot take checkpoints (not btrfs) stays so: said once, then at debug
          // (asked again each minute), not on every turn.
          if (!cannotSaid) logger.warn(fields, 'no checkpoints: the workspace storage cannot take them (said once)');
          else logger.debug(fields, 'no checkpoint for this turn');
          cannotSaid = true;
          unavailableUntil = Date.now() + 60_000;
        }
      }
    },

    list: (record) => rows(record.id),

    async rewind(record, at, scope, actor, commit) {
      if (!isResting(record.state.phase.kind)) throw busy(record, 'rewind it');
      const messages = await messagesOf(record);
      const last = messages.at(-1)?.sequence ?? 0;
      const withHistory = scope !== 'files';
      // 0: before the first message (the files only; a history cannot be empty).
      const lowest = withHistory ? 1 : 0;
      if (at < lowest || at > last)
        throw new ConnectError(
          `at_message ${at} is not a point of conversation ${record.id} to rewind ${withHistory ? 'its history' : 'its files'} to: give ${lowest} to ${last}`,
          Code.InvalidArgument,
        );
      const withFiles = scope !== 'history';
      if (withHistory) {
        const point = chooseForkPoint(messages, at);
        if (point.kind !== 'ok' || point.through !== at)
          throw new ConnectError(
            `cannot rewind the history of conversation ${record.id} to message ${at}: ${point.kind === 'invalid' ? point.problem.replace(/: fork /, ': rewind ') : 'not a place a history can end'}`,
            Code.InvalidArgument,
          );
      }
      let filesFromTurn = 0;
      if (withFiles) {
        const { storage, workspaceId } = requireStorage(record);
        const all = await rows(record.id);
        const point = filesPoint(
          messages,
          all.map((r) => r.turn),
          at,
        );
        if (point.kind === 'none')
          throw (
            (all.length === 0 ? await storageCannot(storage, `cannot rewind the files of conversation ${record.id}`) : undefined) ??
            new ConnectError(`cannot rewind the files of conversation ${record.id}: ${point.problem}`, Code.FailedPrecondition)
          );
        if (point.kind === 'checkpoint') {
          const row = all.find((r) => r.turn === point.turn)!;
          try {
            await storage.restoreCheckpoint(workspaceId, row.checkpointId, await quotaOf(workspaceId));
          } catch (err) {
            throw storageFailure(err, `cannot rewind the files of conversation ${record.id}`);
          }
          filesFromTurn = point.turn;
        }
      }
      // The history, the audit row and (the caller's) request outcome in one transaction, with the
      // row locked and checked again: a message sent meanwhile makes it busy.
      let publish: (() => Promise<void>) | null = null;
      const removed = await options.store.withLocked(record.id, async (client, read) => {
        if (withHistory && !isResting(read.record.state.phase.kind)) throw busy(read.record, 'rewind it');
        let count = 0;
        if (withHistory) {
          count = (await client.query('DELETE FROM messages WHERE conversation_id = $1 AND sequence > $2', [record.id, at])).rowCount ?? 0;
          // Watchers are told (a durable `history_rewound` notification, in order with the others):
          // they drop the messages after `at` without reconnecting.
          const notifySeq = read.record.notifySeq + 1;
          const row = notificationRow(record.id, notifySeq, { case: 'historyRewound', value: { through: BigInt(at) } });
          // A newer revision: a replica's remembered copy of the row is read again before its next write.
          await client.query(
            'UPDATE conversations SET message_seq = $2, notify_seq = $3, revision = revision + 1, updated_at = now() WHERE id = $1',
            [record.id, at, notifySeq],
          );
          const inserted = await client.query<{ id: string }>(
            'INSERT INTO outbox (effect_id, conversation_id, kind, payload) VALUES ($1, $2, $3, $4) RETURNING id::text AS id',
            [row.effectId, row.conversationId, row.kind, JSON.stringify(row.payload)],
          );
          const stored: StoredOutboxRow = { id: inserted.rows[0]!.id, createdAt: Date.now(), row };
          const unsent = read.unsentOutbox;
          publish = () => options.publisher?.publishCommitted(record.id, unsent, [stored]) ?? Promise.resolve();
          // Turns that no longer exist keep no checkpoint.
          await client.query('DELETE FROM conversation_checkpoints WHERE conversation_id = $1 AND turn_message > $2', [record.id, at]);
        }
        await insertAuditRows(client, [
          {
            userId: actor?.userId ?? record.ownerId,
            action: 'conversation_rewound',
            conversationId: record.id,
            details: { at_message: at, scope, files_from_turn: filesFromTurn, messages_removed: count, ...clientDetails(actor) },
          },
        ]);
        await commit?.(client, { filesFromTurn, messagesRemoved: count });
        return count;
      });
      if (removed === null) throw new ConnectError(`conversation ${record.id} not found`, Code.NotFound);
      if (publish) await (publish as () => Promise<void>)();
      logger.info(
        { conversation_id: record.id, at_message: at, scope, files_from_turn: filesFromTurn, messages_removed: removed },
        'conversation rewound',
      );
      return { filesFromTurn, messagesRemoved: removed };
    },

    async diff(record, from, to) {
      const { storage, workspaceId } = requireStorage(record);
      const messages = await messagesOf(record);
      let a = await sideOf(record, messages, from);
      const b = await sideOf(record, messages, to);
      if (from === 0 && to === 0) {
        const latest = (await rows(record.id)).at(-1);
        if (!latest)
          throw (
            (await storageCannot(storage, `cannot compare the files of conversation ${record.id}`)) ??
            new ConnectError(`conversation ${record.id} has no checkpoint yet (none of its turns ran a tool)`, Code.FailedPrecondition)
          );
        a = latest.checkpointId;
      }
      try {
        return await storage.checkpointDiff(workspaceId, a, b);
      } catch (err) {
        throw storageFailure(err, `cannot compare the files of conversation ${record.id}`);
      }
    },

    async forkFiles(record, at) {
      const { storage, workspaceId } = requireStorage(record);
      const messages = await messagesOf(record);
      const all = await rows(record.id);
      const point = filesPoint(
        messages,
        all.map((r) => r.turn),
        at,
      );
      if (point.kind === 'none')
        throw (
          (all.length === 0 ? await storageCannot(storage, `cannot fork conversation ${record.id} with its files`) : undefined) ??
          new ConnectError(`cannot fork conversation ${record.id} with its files: ${point.problem}`, Code.FailedPrecondition)
        );
      if (point.kind === 'now' && !isResting(record.state.phase.kind))
        throw new ConnectError(
          `cannot fork conversation ${record.id} with its files as at message ${at}: it is busy and its files are changing; fork at a message before its current turn, or wait until it is idle`,
          Code.FailedPrecondition,
        );
      const base = (record.workspace!.name || 'workspace').slice(0, 40);
      const name = `${base}-fork-${randomBytes(4).toString('hex')}`;
      const source =
        point.kind === 'checkpoint'
          ? { kind: 'checkpoint' as const, of: workspaceId, checkpointId: all.find((r) => r.turn === point.turn)!.checkpointId }
          : { kind: 'copy' as const, of: workspaceId };
      const row = await options.workspaces.create(record.ownerId, name, source, null);
      return { id: row.id, name: row.name, path: row.path };
    },

    async forget(conversationIds) {
      if (conversationIds.length === 0) return;
      const { rows: found } = await pool.query<{ conversation_id: string; workspace_id: string }>(
        'SELECT DISTINCT conversation_id, workspace_id FROM conversation_checkpoints WHERE conversation_id = ANY($1::text[])',
        [conversationIds],
      );
      for (const r of found) {
        try {
          if (options.storage) await options.storage.removeCheckpoints(r.workspace_id, [], checkpointPrefixOf(r.conversation_id));
          await pool.query('DELETE FROM conversation_checkpoints WHERE conversation_id = $1 AND workspace_id = $2', [
            r.conversation_id,
            r.workspace_id,
          ]);
        } catch (err) {
          logger.warn(
            { conversation_id: r.conversation_id, err: (err as Error).message },
            'checkpoints of a deleted conversation not freed yet',
          );
        }
      }
    },
  };
}
