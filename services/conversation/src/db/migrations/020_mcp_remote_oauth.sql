-- Remote MCP servers (Streamable HTTP) and each user's OAuth login to them (docs/mcp.md,
-- "Remote servers" and "OAuth").
-- A user's server is a command (stdio) or a URL (remote): exactly one of them.
ALTER TABLE mcp_servers ADD COLUMN url TEXT NOT NULL DEFAULT '';

-- One login per (user, server name): the client registered with the authorization server and
-- the tokens. `sealed` is AES-256-GCM ciphertext (BEDROCK_MCP_TOKEN_KEY) of the JSON of the
-- tokens and client information: the token bytes are never stored in the clear. A row with
-- `invalid` set is a login the authorization server refused to refresh (revoked or expired).
CREATE TABLE mcp_oauth_logins (
  owner_id    TEXT NOT NULL,
  name        TEXT NOT NULL,
  -- The server's URL the login is for: a login never follows a server to another URL.
  server_url  TEXT NOT NULL,
  sealed      BYTEA NOT NULL,
  -- When the access token expires (NULL: it did not say).
  expires_at  TIMESTAMPTZ,
  invalid     BOOLEAN NOT NULL DEFAULT false,
  updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_id, name)
);

-- Logins under way: the PKCE verifier and the state, kept here (never in a URL) for 10 minutes.
CREATE TABLE mcp_oauth_pending (
  state       TEXT PRIMARY KEY,
  owner_id    TEXT NOT NULL,
  name        TEXT NOT NULL,
  server_url  TEXT NOT NULL,
  redirect_uri TEXT NOT NULL,
  -- AES-256-GCM ciphertext of the verifier and the client information.
  sealed      BYTEA NOT NULL,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX mcp_oauth_pending_created ON mcp_oauth_pending (created_at);
