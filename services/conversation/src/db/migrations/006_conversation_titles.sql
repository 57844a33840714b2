-- Conversation titles (docs/conversation.md, "Titles"): `title` is set from the first user
-- message with words when it is accepted (title_source 'message') or by RenameConversation
-- ('user'); an automatic title is written only while `title` is NULL, so a rename is never
-- replaced. NULL until then.

ALTER TABLE conversations
  ADD COLUMN title         TEXT,
  ADD COLUMN title_source  TEXT CHECK (title_source IN ('message', 'user'));

-- Conversations from before titles: their first user message's first line with words, as the
-- service makes it (src/titles.ts), approximated in SQL: leading markdown (headings, quotes,
-- list markers) and code-span backticks and ** removed, whitespace collapsed, cut at the last
-- space within 60 characters with "…".
WITH first_line AS (
  SELECT DISTINCT ON (m.conversation_id)
         m.conversation_id,
         regexp_replace(
           regexp_replace(
             regexp_replace(btrim(l.line), '^(#{1,6}\s+|>\s?|[-*+]\s+|\d{1,9}[.)]\s+)+', ''),
             '`|\*\*', '', 'g'),
           '\s+', ' ', 'g') AS line
    FROM messages m
    CROSS JOIN LATERAL jsonb_array_elements(m.content) WITH ORDINALITY AS b(block, k)
    CROSS JOIN LATERAL regexp_split_to_table(b.block->>'text', E'\r?\n') WITH ORDINALITY AS l(line, n)
   WHERE m.message_type = 'user' AND b.block->>'type' = 'text' AND l.line ~ '[[:alnum:]]' AND btrim(l.line) !~ '^(```|~~~)'
   ORDER BY m.conversation_id, m.sequence, b.k, l.n
)
UPDATE conversations c
   SET title = CASE WHEN char_length(f.line) <= 60 THEN f.line
                    ELSE COALESCE(substring(f.line FROM '^(.{30,60}) '), left(f.line, 60)) || '…' END,
       title_source = 'message'
  FROM first_line f
 WHERE c.id = f.conversation_id AND c.title IS NULL AND btrim(f.line) <> '';

-- Search over titles (ListConversations.query: a case-insensitive substring, ILIKE). A user's
-- conversations are found through conversations_owner_idx, and for most users reading them all is
-- cheap; for a user with very many, a trigram index on (owner_id, title) finds the matching few
-- (PostgreSQL's contrib extensions pg_trgm and btree_gin, both trusted since PostgreSQL 13, so the
-- database owner may create them; the embedded PGlite loads both). Where they cannot be had,
-- search works without the index (a notice says so). Sub-agents are searched through their
-- parent's index.
DO $$
BEGIN
  IF (SELECT count(*) FROM pg_available_extensions WHERE name IN ('pg_trgm', 'btree_gin')) = 2 THEN
    BEGIN
      CREATE EXTENSION IF NOT EXISTS pg_trgm;
      CREATE EXTENSION IF NOT EXISTS btree_gin;
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE NOTICE 'pg_trgm and btree_gin are available but this role may not create them: title search runs without its index';
    END;
  END IF;
  IF (SELECT count(*) FROM pg_extension WHERE extname IN ('pg_trgm', 'btree_gin')) = 2 THEN
    CREATE INDEX conversations_title_trgm_idx ON conversations USING gin (owner_id, title gin_trgm_ops) WHERE parent_id IS NULL;
  ELSE
    RAISE NOTICE 'pg_trgm or btree_gin is not available: title search runs without its index';
  END IF;
END
$$;
