-- Outcomes of client requests that carried a request id (docs/conversation.md, "Idempotent
-- requests"): written in the transaction that applied (or refused) the request, so a retry
-- with the same id is answered from here and applies nothing again. Pruned after
-- BEDROCK_REQUEST_ID_RETENTION.

CREATE TABLE request_outcomes (
  owner_id       TEXT NOT NULL,             -- the user
  scope          TEXT NOT NULL,             -- the conversation id; '' for CreateConversation
  request_id     TEXT NOT NULL,             -- client-chosen, at most 128 characters
  method         TEXT NOT NULL,             -- e.g. SendMessage
  fingerprint    TEXT NOT NULL,             -- SHA-256 of the method and the request without its id
  response       BYTEA,                     -- the response, protobuf binary (SendMessage: without the message)
  message_id     TEXT,                      -- SendMessage: the persisted message, read back on a retry
  error_code     INTEGER,                   -- or the error answered: Connect code,
  error_message  TEXT,                      --   message
  rejection      TEXT,                      --   and rejection code (the Rejection error detail)
  created_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
  PRIMARY KEY (owner_id, scope, request_id)
);

CREATE INDEX request_outcomes_created_idx ON request_outcomes (created_at);
