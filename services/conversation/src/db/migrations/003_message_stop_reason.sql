-- Why each agent response ended (docs/conversation.md, "Messages"): max_tokens (cut by the
-- output limit and continued), pause_turn (paused by the provider and resumed), refusal (the
-- model declined; left out of later requests), ... and the provider's explanation of a
-- refusal. NULL for other messages and for agent messages stored before this column existed.

ALTER TABLE messages
  ADD COLUMN stop_reason       TEXT,
  ADD COLUMN stop_explanation  TEXT;
