-- Each user's own MCP servers (bedrock.v1.McpService; docs/mcp.md). The operator's servers are
-- a setting (BEDROCK_MCP_SERVERS), not rows. Every stdio server runs in the tool sandbox as
-- its owner's tool user, so a row names a program and nothing more trusted than that.
CREATE TABLE mcp_servers (
  owner_id    TEXT NOT NULL,
  -- '' for all of the owner's conversations; else the one conversation it belongs to.
  conversation_id TEXT NOT NULL DEFAULT '',
  name        TEXT NOT NULL,
  command     TEXT NOT NULL,
  args        JSONB NOT NULL DEFAULT '[]',
  env         JSONB NOT NULL DEFAULT '{}',
  timeout_ms  BIGINT NOT NULL DEFAULT 0,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_id, conversation_id, name)
);
