-- Secrets this service makes for itself once per deployment and every replica shares: the key of
-- the owner reference (metadata.user_id, docs/conversation.md "Owner reference") unless
-- BEDROCK_OWNER_REF_SECRET_FILE gives one. Made by the first replica that starts (ON CONFLICT).
CREATE TABLE service_secrets (
  name        TEXT PRIMARY KEY,
  value       TEXT NOT NULL,
  created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);
