-- The audit log (docs/security.md, "Audit"): who did what, when, from which client. Each row is
-- written in the same transaction as the action it records (the conversation's state change,
-- the user or token change, the deletion), so an action never commits without its row.
--
-- Append-only: no code path updates or deletes a row, and the database refuses it too. Every
-- service connects as one database role, so revoking UPDATE and DELETE from "the others" is
-- not possible; instead the triggers below raise on UPDATE, DELETE and TRUNCATE. Retention is
-- the operator's, by hand (docs/security.md: disable the trigger explicitly in a transaction,
-- delete the old rows, enable it again).
--
-- No foreign keys: an event outlives the conversation or user it names.

CREATE TABLE audit_events (
  id               BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  at               TIMESTAMPTZ NOT NULL DEFAULT now(),
  -- Who acted (for an upgrade request: the owner of the conversation whose agent asked).
  user_id          TEXT NOT NULL,
  action           TEXT NOT NULL,
  conversation_id  TEXT,
  -- client (as web-bff saw it), reason, the user or token concerned...
  details          JSONB NOT NULL DEFAULT '{}'::jsonb
);

-- ListAuditEvents: newest first, optionally of one user or one action.
CREATE INDEX audit_events_at_idx ON audit_events (at, id);
CREATE INDEX audit_events_user_idx ON audit_events (user_id, id);
CREATE INDEX audit_events_action_idx ON audit_events (action, id);

CREATE FUNCTION audit_events_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'audit_events is append-only: % is not allowed (retention: docs/security.md, "Audit")', TG_OP
    USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_events_no_update_or_delete BEFORE UPDATE OR DELETE ON audit_events
  FOR EACH ROW EXECUTE FUNCTION audit_events_append_only();
CREATE TRIGGER audit_events_no_truncate BEFORE TRUNCATE ON audit_events
  FOR EACH STATEMENT EXECUTE FUNCTION audit_events_append_only();
