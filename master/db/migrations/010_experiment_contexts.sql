-- User trials (docs/core-api.md). An experiment with an `entrypoint` may carry its context
-- directory: a gzip tar, stored once, which agents fetch by its SHA-256 (TrialLink.GetContext).
CREATE TABLE experiment_contexts (
  experiment_id   BIGINT PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,
  sha256          TEXT NOT NULL,
  archive         BYTEA NOT NULL,
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Unmanaged experiments: one trial that a script started by hand reports into; the scheduler
-- never places it, and it ends when the script says so (TrialLink.EndTrial).
ALTER TABLE experiments ADD COLUMN unmanaged BOOLEAN NOT NULL DEFAULT false;
