-- Tokens per user per UTC day, beside the spend (011_costs.sql), written by the same statement
-- that applies a response, so the share of the prompt read from the cache can be shown for a
-- day or a month (GetUsage, `bedrock usage`, the web UI's spend line). Rows written before this
-- migration count 0 tokens.
ALTER TABLE user_daily_spend
  ADD COLUMN input_tokens          BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN output_tokens         BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN cache_creation_tokens BIGINT NOT NULL DEFAULT 0,
  ADD COLUMN cache_read_tokens     BIGINT NOT NULL DEFAULT 0;
