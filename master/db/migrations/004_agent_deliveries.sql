-- At-least-once agent events (docs/cluster.md, "Message delivery"), version 4.
--
-- One row per agent: the incarnation (one run of the sf-agent process) whose events the master
-- is applying, and the highest event sequence of it that has been applied. A re-sent event at
-- or below applied_through is acknowledged and not applied again, also after a master restart.
-- Log batches advance the row in the transaction that inserts their lines
-- (master/ingest/log_writer.cc), so a log line is stored exactly once.
CREATE TABLE agent_deliveries (
  agent_id        TEXT PRIMARY KEY,
  incarnation     TEXT NOT NULL,
  applied_through BIGINT NOT NULL DEFAULT 0,
  updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);
