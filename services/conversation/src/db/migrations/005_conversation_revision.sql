-- Every change of a conversation row bumps `revision` (events, settings, archiving). Applying an
-- event writes only if the revision it started from is still current (optimistic versioning), so
-- a replica may apply from the row it wrote last without reading it again: any other change in
-- between makes the write miss, and the applier reads and tries again.
ALTER TABLE conversations ADD COLUMN revision BIGINT NOT NULL DEFAULT 0;
