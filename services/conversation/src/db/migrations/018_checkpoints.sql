-- Checkpoints (docs/workspaces.md, "Checkpoints"): one row per read-only snapshot the workspace
-- storage took before the first tool of a user turn. `turn_message` is that turn's user message;
-- `checkpoint_id` names the snapshot on the storage. No foreign key: when a conversation is
-- deleted its rows are read to free the snapshots, then deleted.
CREATE TABLE conversation_checkpoints (
  conversation_id  TEXT NOT NULL,
  turn_message     BIGINT NOT NULL,
  workspace_id     TEXT NOT NULL,
  checkpoint_id    TEXT NOT NULL,
  created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (conversation_id, turn_message)
);
CREATE INDEX conversation_checkpoints_workspace ON conversation_checkpoints (workspace_id, checkpoint_id);
