-- MCP servers a user turned off for one conversation (bedrock.v1.McpService.SetMcpServerEnabled;
-- docs/mcp.md). A row names a server by name: the operator's, the user's for all conversations or
-- the conversation's own; turning it on again deletes the row.
CREATE TABLE mcp_servers_off (
  owner_id        TEXT NOT NULL,
  conversation_id TEXT NOT NULL,
  name            TEXT NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_id, conversation_id, name)
);
