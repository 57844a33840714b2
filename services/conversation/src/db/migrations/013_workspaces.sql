-- Workspaces (docs/workspaces.md): directories the server owns, each of one user, on the
-- tool-runners' storage. `path` is set once the storage has made it (state `ready`); a row
-- still `preparing` after a crash is finished or removed by the next call that meets it.
CREATE TABLE workspaces (
  id            TEXT PRIMARY KEY,
  owner_id      TEXT NOT NULL,
  name          TEXT NOT NULL,
  path          TEXT NOT NULL DEFAULT '',
  origin        TEXT NOT NULL,
  state         TEXT NOT NULL DEFAULT 'preparing' CHECK (state IN ('preparing', 'ready')),
  quota_bytes   BIGINT NOT NULL DEFAULT 0,
  quota_inodes  BIGINT NOT NULL DEFAULT 0,
  request_id    TEXT,
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  last_used_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (owner_id, name)
);

-- Each user's own tool uid (and gid, the same number), from BEDROCK_TOOL_UIDS, allocated at the
-- first workspace. Never reused: the row outlives the user, so files left anywhere by a deleted
-- user's tools can never become another user's.
CREATE TABLE user_tool_ids (
  user_id     TEXT PRIMARY KEY,
  uid         INTEGER NOT NULL UNIQUE CHECK (uid > 0),
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- A conversation's workspace, copied at creation (a workspace is never renamed or moved), so
-- applying an event reads no other table. NULL for a host-path conversation.
ALTER TABLE conversations
  ADD COLUMN workspace_id   TEXT REFERENCES workspaces(id),
  ADD COLUMN workspace_name TEXT,
  ADD COLUMN workspace_path TEXT,
  ADD COLUMN tool_uid       INTEGER;
CREATE INDEX conversations_workspace_idx ON conversations (workspace_id) WHERE workspace_id IS NOT NULL;
