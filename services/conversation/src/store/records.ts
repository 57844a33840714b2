/** The conversation store's records: what callers read and write (store/conversation-store.ts composes the stores). */
import type { Pool } from 'pg';
import type { ContentBlock, ConversationState, MessageType, StopReason, Usage } from '../core/index.ts';
import type { ServerToolName, ThinkingSetting } from '../settings.ts';
import type { OutboxRow } from './outbox-row.ts';
import type { AuditRow } from './audit-store.ts';
import type { PriorOutcome } from './request-outcomes.ts';

/**
 * Who set a title: the first user message, the owner (RenameConversation; never replaced
 * automatically), or ForkConversation ("Fork of …", forks.ts; the first message does not replace it either).
 */
export type TitleSource = 'message' | 'user' | 'fork';

/** A stored message. */
export interface MessageRow {
  readonly id: string;
  readonly conversationId: string;
  readonly sequence: number;
  readonly type: MessageType;
  readonly content: readonly ContentBlock[];
  readonly usage: Usage | null;
  /** Agent messages: why the response ended; null for other messages and those stored before it existed. */
  readonly stopReason: StopReason | null;
  readonly stopExplanation: string;
  readonly createdAt: Date;
}

export interface ConversationRecord {
  readonly id: string;
  readonly ownerId: string;
  readonly slug: string;
  readonly cwd: string;
  readonly model: string;
  readonly contextWindow: number;
  readonly sandboxAvailable: boolean;
  readonly parentId: string | null;
  readonly userInitiated: boolean;
  readonly continuedFromId: string | null;
  readonly state: ConversationState;
  readonly version: number;
  /** Bumped by every change of the row; the token of optimistic writes. */
  readonly revision: number;
  readonly notifySeq: number;
  readonly messageSeq: number;
  readonly createdAt: Date;
  readonly updatedAt: Date;
  readonly stateUpdatedAt: Date;
  readonly archived: boolean;
  /** Extended thinking of its LLM requests (stored resolved). */
  readonly thinking: ThinkingSetting;
  /** Provider-run tools turned on. */
  readonly serverTools: readonly ServerToolName[];
  /** Null until the first user message with words, or a rename. */
  readonly title: string | null;
  readonly titleSource: TitleSource | null;
  /** Set on a fork (ForkConversation): its source, the last message copied from it, and whether the source was deleted since. */
  readonly forkedFrom: { readonly conversationId: string; readonly messageSequence: number; readonly sourceDeleted: boolean } | null;
  /** What its responses cost, in micro-dollars (docs/conversation.md, "Costs and budgets"). */
  readonly costMicros: number;
  /** The workspace its tools run in, with the owner's tool uid; null for a host-path conversation. */
  readonly workspace: ConversationWorkspace | null;
}

/** A conversation's workspace as its tools need it (copied onto the row at creation). */
export interface ConversationWorkspace {
  readonly id: string;
  readonly name: string;
  /** The workspace's directory on the runners' storage. */
  readonly path: string;
  /** The owner's tool uid (and gid). */
  readonly toolUid: number;
}

/** What the caller decides before a conversation is created (see apply/applier.ts `newConversation`). */
export interface NewConversation {
  readonly id: string;
  readonly ownerId: string;
  readonly slug: string;
  readonly cwd: string;
  readonly model: string;
  readonly sandboxAvailable: boolean;
  readonly parentId?: string | null;
  readonly continuedFromId?: string | null;
  /** Absent: a sub-agent's parent's, else `high`. */
  readonly thinking?: ThinkingSetting;
  /** Absent: a sub-agent's parent's, else none. */
  readonly serverTools?: readonly ServerToolName[];
  /** The model's context window (from the model registry at creation). */
  readonly contextWindow: number;
  /** The state machine's initial state for this conversation. */
  readonly state: ConversationState;
  /** A title known at creation (a sub-agent's, from its task), as if from its first message. */
  readonly title?: string | null;
  /** Absent: a sub-agent's parent's, else none (a host-path conversation). */
  readonly workspace?: ConversationWorkspace | null;
}

/** What a fork copies from its source, besides what its row says (see store.fork). */
export interface ForkCopy {
  readonly sourceId: string;
  /** The last message copied: the source's messages 1 to this become the fork's, with the same sequences. */
  readonly through: number;
  readonly title: string;
  /** A system message appended after the copy (the Restricted mode notice), or null. */
  readonly notice: readonly ContentBlock[] | null;
}

/** A change of settings; an absent field stays as it is. */
export interface SettingsChange {
  readonly thinking?: ThinkingSetting;
  readonly serverTools?: readonly ServerToolName[];
}

/** A conversation as one moment saw it: its row, its messages, and its first sub-agents. */
export interface Snapshot {
  readonly record: ConversationRecord;
  readonly messages: MessageRow[];
  readonly subAgents: ConversationRecord[];
  /** More sub-agents exist than were read. */
  readonly moreSubAgents: boolean;
}

/** What DeleteConversation found: the tree's ids, or why it deleted nothing. */
export type DeleteResult =
  | {
      readonly kind: 'deleted';
      readonly ids: readonly string[];
      readonly record: ConversationRecord;
      readonly notifySeqs: ReadonlyMap<string, number>;
    }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'sub_agent'; readonly parentId: string }
  | { readonly kind: 'busy'; readonly busy: readonly ConversationRecord[] }
  | Replayed;

/** What DeleteUser found: what it deleted, or why it deleted nothing. */
export type DeleteUserResult =
  | {
      readonly kind: 'deleted';
      /** The users row as it was; null when the user had none (known only by their conversations). */
      readonly user: DeletedUserRow | null;
      /** Every conversation deleted: each top-level one followed by its sub-agents. */
      readonly ids: readonly string[];
      readonly tokens: number;
      readonly notifySeqs: ReadonlyMap<string, number>;
      /** Their workspaces, whose records went with them: the caller removes the files. */
      readonly workspaceIds: readonly string[];
    }
  | { readonly kind: 'not_found' }
  | { readonly kind: 'busy'; readonly busy: readonly ConversationRecord[]; readonly rootOf: ReadonlyMap<string, string> }
  | Replayed;

/** The users row of a deleted user (migration 007's columns). */
export interface DeletedUserRow {
  readonly id: string;
  readonly display_name: string;
  readonly role: 'user' | 'admin';
  readonly created_at: Date;
  readonly disabled_at: Date | null;
}

/** Token counts of applied responses (each kind once: cache writes and reads are not in `input`). */
export interface TokenCounts {
  readonly input: number;
  readonly output: number;
  readonly cacheCreation: number;
  readonly cacheRead: number;
}

export const NO_TOKENS: TokenCounts = { input: 0, output: 0, cacheCreation: 0, cacheRead: 0 };

/** A request id used before: nothing was applied; the first outcome (or a mismatch) is in `prior`. */
export interface Replayed {
  readonly kind: 'replayed';
  readonly prior: PriorOutcome;
}

/** What applying an event reads: the row, and its outbox rows not yet marked sent (ids). */
export interface ApplyRead {
  readonly record: ConversationRecord;
  readonly unsentOutbox: readonly string[];
}

/** Everything one applied transition writes (see writeApplied). */
export interface AppliedWrite {
  readonly id: string;
  /** The row's revision the transition started from; the write happens only if it is still current. */
  readonly expectedRevision: number;
  readonly state: ConversationState;
  readonly notifySeq: number;
  readonly messageSeq: number;
  /** Whether state_updated_at moves (recovery measures staleness from it). */
  readonly touchState: boolean;
  /** New messages; ids and sequences are assigned by the applier. */
  readonly messages: readonly MessageRow[];
  readonly outbox: readonly OutboxRow[];
  /** The automatic title this event gives a conversation that has none (its first user message), else null. */
  readonly title: string | null;
  /** Audit rows of this transition (mapping/audit-rows.ts), written only if the state is. */
  readonly audit: readonly AuditRow[];
  /**
   * What the responses this transition applied cost (micro-dollars, 0 for most events), added
   * to the conversation and to its owner's spend of `spendDay` (UTC, YYYY-MM-DD) in the same
   * statement, so only if the state is written.
   */
  readonly costMicros: number;
  readonly spendDay: string;
  /** The tokens the same responses counted, added to the owner's day beside the spend (zeros for most events). */
  readonly tokens: TokenCounts;
  /**
   * No LLM request of the new state can still be answered: the conversation's budget reservation
   * (spend/limits.ts) is deleted in the same statement — settled by the cost above, or released.
   */
  readonly releaseReservation: boolean;
  /**
   * Written only if the owner has no budget of their own (a `user_limits` row with a daily or
   * monthly budget); otherwise nothing is written and the write misses, as a stale revision
   * does. Set on an LLM request decided without reading the owner's budget first, when the
   * service's defaults have none (apply/applier.ts, `budgetCheckedOnWrite`). Absent: false.
   */
  readonly onlyWithoutBudget?: boolean;
}

/** A title set by its owner, with the notification that tells watchers (written in one commit). */
export interface TitleWrite {
  readonly title: string;
  readonly notifySeq: number;
  readonly outbox: readonly OutboxRow[];
}

export interface ListOptions {
  readonly ownerId: string;
  /** List the sub-agents of this conversation instead of user-initiated ones. */
  readonly parentId?: string;
  readonly includeArchived?: boolean;
  readonly limit: number;
  /** Opaque cursor from a previous page. */
  readonly after?: string;
  /** Only titles containing this text, ignoring case. */
  readonly query?: string;
}

export interface StoreOptions {
  readonly pool: Pool;
  /**
   * Applied events' writes of different conversations share statements (group-commit.ts; on by
   * default). False: one statement per event, only for the apply benchmark's comparison.
   */
  readonly groupCommit?:
    | false
    | {
        readonly maxInFlight?: number;
        readonly maxBatch?: number;
        /** Called with the number of writes of each statement (the `bedrock_write_batch_size` metric). */
        readonly onBatch?: (writes: number) => void;
      };
}
