-- Costs (docs/conversation.md, "Costs and budgets"): what each response cost, in whole
-- micro-dollars (1 USD = 1,000,000; integers, never floating point), summed on the conversation
-- and per user per UTC day. Both are written by the applier's one statement that applies the
-- response (the conditional UPDATE of the conversation's revision), so an event applied twice,
-- or redelivered after its commit, counts once. A month's spend is the sum of its days.

ALTER TABLE conversations ADD COLUMN cost_micros BIGINT NOT NULL DEFAULT 0;

-- Not tied to the conversations: deleting a conversation leaves what it cost.
CREATE TABLE user_daily_spend (
  user_id     TEXT   NOT NULL,
  day         DATE   NOT NULL,
  cost_micros BIGINT NOT NULL DEFAULT 0,
  PRIMARY KEY (user_id, day)
);
