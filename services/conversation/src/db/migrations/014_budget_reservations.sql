-- Budget reservations (docs/conversation.md, "Limits"): before an LLM request is emitted, its
-- worst-case cost is held from the owner's remaining budget, so that concurrent requests cannot
-- overshoot a budget by more than one request's worth. One row per conversation with a request
-- in flight (a conversation has at most one); the applier writes it under a per-user
-- transaction-scoped advisory lock and deletes it in the statement that writes the response's
-- cost (settle) or a phase without a request in flight (error, cancel). A row a crash left
-- behind counts only until `expires_at` (service clock) or the conversation's next transition.
CREATE TABLE budget_reservations (
  conversation_id TEXT PRIMARY KEY REFERENCES conversations (id) ON DELETE CASCADE,
  user_id         TEXT NOT NULL,
  request_id      TEXT NOT NULL,
  micros          BIGINT NOT NULL CHECK (micros >= 0),
  expires_at      TIMESTAMPTZ NOT NULL
);
CREATE INDEX budget_reservations_user_idx ON budget_reservations (user_id, expires_at);

-- Conversations a user may own at once (top-level: created, forked or continued; sub-agents are
-- their parent's). NULL: the service's default (BEDROCK_MAX_CONVERSATIONS); 0: unlimited.
ALTER TABLE user_limits ADD COLUMN max_conversations INTEGER CHECK (max_conversations >= 0);
-- Counted at each CreateConversation and ForkConversation through conversations_owner_idx.
