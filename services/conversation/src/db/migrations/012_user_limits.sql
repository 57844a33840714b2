-- Limits (docs/conversation.md, "Limits"): what an admin set for a user (SetUserLimits); a NULL
-- column takes the service's default (BEDROCK_DAILY_BUDGET and the rest), 0 is unlimited. No
-- foreign key: a user of the tokens file or of OpenID Connect may have no row in `users`.
CREATE TABLE user_limits (
  user_id                TEXT PRIMARY KEY,
  daily_budget_micros    BIGINT CHECK (daily_budget_micros >= 0),
  monthly_budget_micros  BIGINT CHECK (monthly_budget_micros >= 0),
  max_busy_conversations INTEGER CHECK (max_busy_conversations >= 0),
  messages_per_minute    INTEGER CHECK (messages_per_minute >= 0),
  updated_at             TIMESTAMPTZ NOT NULL DEFAULT now(),
  updated_by             TEXT NOT NULL
);

-- Messages per minute: one row per user, the minute (UTC, from the service's clock) and the
-- messages taken in it. Taking one is one conditional upsert, so replicas share the count.
CREATE TABLE user_message_rate (
  user_id TEXT PRIMARY KEY,
  minute  TIMESTAMPTZ NOT NULL,
  count   INTEGER NOT NULL
);

-- The busy conversations of a user, counted at each SendMessage that would start a turn.
CREATE INDEX conversations_owner_busy_idx ON conversations (owner_id)
  WHERE parent_id IS NULL AND state_kind NOT IN ('idle', 'error', 'context_exhausted', 'completed', 'failed');
