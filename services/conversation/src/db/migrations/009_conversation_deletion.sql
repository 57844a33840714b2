-- Deletion (docs/conversation.md, "Deletion and retention"): DeleteConversation removes a
-- conversation and its sub-agents (parent_id ON DELETE CASCADE), their messages (ON DELETE
-- CASCADE), and, by explicit deletes in the same transaction, their outbox rows and request
-- outcomes (no foreign key). A fork outlives its source: forked_from_id keeps naming the deleted
-- source (so its foreign key, which would set it to NULL, goes) and forked_from_deleted says the
-- source is gone.

ALTER TABLE conversations DROP CONSTRAINT IF EXISTS conversations_forked_from_id_fkey;
ALTER TABLE conversations ADD COLUMN forked_from_deleted BOOLEAN NOT NULL DEFAULT false;
CREATE INDEX conversations_forked_from_idx ON conversations (forked_from_id) WHERE forked_from_id IS NOT NULL;

-- Deleting a conversation's outbox rows, sent or not, finds them through this index (the relay
-- deletes published rows an hour after they were sent through outbox_sent_idx).
CREATE INDEX outbox_conversation_idx ON outbox (conversation_id);
