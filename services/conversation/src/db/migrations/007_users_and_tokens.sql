-- Users and their bearer tokens (docs/security.md, "Users and sign-in"), managed through
-- AdminService and checked by web-bff through IdentityService. A user's id is the owner id of
-- their conversations (conversations.owner_id) and the value an OpenID Connect claim is
-- matched with. Users are disabled, never deleted here; a token is stored as the SHA-256 of
-- its secret, which is shown once.

CREATE TABLE users (
  id            TEXT PRIMARY KEY,
  display_name  TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('user', 'admin')),
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  disabled_at   TIMESTAMPTZ
);

CREATE TABLE user_tokens (
  id            TEXT PRIMARY KEY,
  user_id       TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
  token_sha256  BYTEA NOT NULL UNIQUE CHECK (octet_length(token_sha256) = 32),
  label         TEXT NOT NULL DEFAULT '',
  created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
  expires_at    TIMESTAMPTZ,
  revoked_at    TIMESTAMPTZ,
  last_used_at  TIMESTAMPTZ
);

CREATE INDEX user_tokens_user_idx ON user_tokens (user_id, created_at DESC);
