-- Forks (docs/conversation.md, "Forks"): a conversation made by ForkConversation names its
-- source and the sequence of the last message copied from it (its messages 1 to that sequence
-- are copies of the source's). A fork's title is "Fork of …" (title_source 'fork'); like an
-- automatic title it is never written over a rename, and the first message does not replace it.

ALTER TABLE conversations
  ADD COLUMN forked_from_id  TEXT REFERENCES conversations(id) ON DELETE SET NULL,
  ADD COLUMN forked_from_seq BIGINT;

ALTER TABLE conversations DROP CONSTRAINT IF EXISTS conversations_title_source_check;
ALTER TABLE conversations ADD CONSTRAINT conversations_title_source_check CHECK (title_source IN ('message', 'user', 'fork'));
