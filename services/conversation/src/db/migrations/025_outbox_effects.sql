-- The effects one event decided for one conversation are stored as ONE outbox row of kind
-- `effects` whose payload is the list [{effectId, kind, payload}, ...] (docs/conversation.md,
-- "Benchmark: applying events"); a single effect keeps a row of its own kind. This view lists
-- every effect, packed or not, one line each, for operators and tests reading the outbox:
--   SELECT * FROM outbox_effects WHERE conversation_id = '...' AND sent_at IS NULL;
CREATE VIEW outbox_effects AS
SELECT o.id, e.ordinality AS n, COALESCE(e.value->>'effectId', o.effect_id) AS effect_id, o.conversation_id,
       COALESCE(e.value->>'kind', o.kind) AS kind, COALESCE(e.value->'payload', o.payload) AS payload, o.created_at, o.sent_at
  FROM outbox o,
       jsonb_array_elements(CASE WHEN o.kind = 'effects' THEN o.payload ELSE jsonb_build_array(NULL::jsonb) END) WITH ORDINALITY AS e(value, ordinality);
