-- Conversations, their messages, and the transactional outbox (docs/design.md "the life of an event").

CREATE TABLE conversations (
  id                 TEXT PRIMARY KEY,
  owner_id           TEXT NOT NULL,
  slug               TEXT NOT NULL UNIQUE,
  cwd                TEXT NOT NULL,                      -- REQ-BED-010: fixed at creation
  model              TEXT NOT NULL,
  context_window     INTEGER NOT NULL,                   -- from the model registry at creation
  mode               TEXT NOT NULL,                      -- copy of state.mode, for listings
  sandbox_available  BOOLEAN NOT NULL,
  parent_id          TEXT REFERENCES conversations(id) ON DELETE CASCADE,  -- REQ-BED-009
  user_initiated     BOOLEAN NOT NULL,
  continued_from_id  TEXT REFERENCES conversations(id) ON DELETE SET NULL, -- REQ-BED-021
  state_kind         TEXT NOT NULL,                      -- copy of state.phase.kind
  state              JSONB NOT NULL,                     -- the pure core's ConversationState
  version            BIGINT NOT NULL DEFAULT 0,          -- = state.seq
  notify_seq         BIGINT NOT NULL DEFAULT 0,          -- last notification sequence issued
  message_seq        BIGINT NOT NULL DEFAULT 0,          -- last message sequence issued
  created_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_at         TIMESTAMPTZ NOT NULL DEFAULT now(),
  state_updated_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  archived           BOOLEAN NOT NULL DEFAULT false
);

CREATE INDEX conversations_owner_idx ON conversations (owner_id, created_at DESC, id DESC) WHERE parent_id IS NULL;
CREATE INDEX conversations_parent_idx ON conversations (parent_id, created_at, id) WHERE parent_id IS NOT NULL;
-- The recovery sweeper scans busy conversations only.
CREATE INDEX conversations_busy_idx ON conversations (state_updated_at)
  WHERE state_kind NOT IN ('idle', 'error', 'context_exhausted', 'completed', 'failed');

CREATE TABLE messages (
  id               TEXT PRIMARY KEY,
  conversation_id  TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
  sequence         BIGINT NOT NULL,
  message_type     TEXT NOT NULL,     -- user, agent, tool, system, error, continuation
  actor_kind       TEXT NOT NULL,     -- human, llm_agent, system
  content          JSONB NOT NULL,    -- ContentBlock[] of the core
  display_data     JSONB,             -- rendering hints (e.g. a patch's diff)
  usage_data       JSONB,             -- REQ-BED-012
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (conversation_id, sequence)
);

-- One row per effect, written in the transaction that decided it; the relay publishes it
-- after commit and marks it sent. Rows left unsent by a crash are published again.
CREATE TABLE outbox (
  id               BIGSERIAL PRIMARY KEY,
  effect_id        TEXT NOT NULL UNIQUE,
  conversation_id  TEXT NOT NULL,
  kind             TEXT NOT NULL,     -- job, remove_job, cancel, notification
  payload          JSONB NOT NULL,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  sent_at          TIMESTAMPTZ
);

CREATE INDEX outbox_unsent_idx ON outbox (conversation_id, id) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;
