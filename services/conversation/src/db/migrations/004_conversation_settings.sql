-- Per-conversation model settings (docs/conversation.md, "Thinking and server tools"):
-- the extended-thinking level (off, low, medium, high, max), stored resolved, and the
-- provider-run tools turned on (web_search, web_fetch). Changed by
-- UpdateConversationSettings; read when each LLM request is built. Conversations created
-- before this migration get the API's own default effort, high, and no server tools.

ALTER TABLE conversations
  ADD COLUMN thinking      TEXT NOT NULL DEFAULT 'high',
  ADD COLUMN server_tools  TEXT[] NOT NULL DEFAULT '{}';
