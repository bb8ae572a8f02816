-- Steadfast master schema, version 1. Applied once, in a transaction, by the master at start.

CREATE TABLE experiments (
  id              BIGSERIAL PRIMARY KEY,
  name            TEXT NOT NULL,
  description     TEXT NOT NULL DEFAULT '',
  state           TEXT NOT NULL,
  config_yaml     TEXT NOT NULL,
  owner           TEXT NOT NULL DEFAULT '',
  archived        BOOLEAN NOT NULL DEFAULT FALSE,
  searcher        TEXT NOT NULL,
  metric          TEXT NOT NULL,
  smaller_is_better BOOLEAN NOT NULL,
  priority        INT NOT NULL,
  progress        DOUBLE PRECISION NOT NULL DEFAULT 0,
  best_validation_metric DOUBLE PRECISION,
  error           TEXT NOT NULL DEFAULT '',
  start_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
  end_time        TIMESTAMPTZ
);
CREATE INDEX experiments_state_idx ON experiments (state);

-- The searcher's state after each event, so a restarted master resumes it exactly.
CREATE TABLE searcher_snapshots (
  experiment_id   BIGINT PRIMARY KEY REFERENCES experiments(id) ON DELETE CASCADE,
  snapshot        JSONB NOT NULL,
  -- Trials the searcher asked for, by its request id, with the operation in flight.
  updated_at      TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE trials (
  id              BIGSERIAL PRIMARY KEY,
  experiment_id   BIGINT NOT NULL REFERENCES experiments(id) ON DELETE CASCADE,
  request_id      BIGINT NOT NULL,
  state           TEXT NOT NULL,
  hparams         JSONB NOT NULL,
  restarts        INT NOT NULL DEFAULT 0,
  total_batches   BIGINT NOT NULL DEFAULT 0,
  target_length   BIGINT NOT NULL DEFAULT 0,   -- the searcher operation in flight
  completed_length BIGINT NOT NULL DEFAULT 0,  -- the last operation the trainer completed
  best_validation_metric   DOUBLE PRECISION,
  latest_validation_metric DOUBLE PRECISION,
  latest_checkpoint_uuid   TEXT NOT NULL DEFAULT '',
  stop_requested  TEXT NOT NULL DEFAULT '',   -- '', 'pause', 'kill', 'close'
  error           TEXT NOT NULL DEFAULT '',
  start_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
  end_time        TIMESTAMPTZ,
  UNIQUE (experiment_id, request_id)
);
CREATE INDEX trials_experiment_idx ON trials (experiment_id);

-- One row per scheduled run of a trial (a trial restarted three times has four).
CREATE TABLE allocations (
  id              TEXT PRIMARY KEY,
  trial_id        BIGINT NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  restart         INT NOT NULL,
  state           TEXT NOT NULL,               -- QUEUED, ASSIGNED, RUNNING, TERMINATED
  slots           JSONB NOT NULL DEFAULT '[]', -- [{"agent_id":..,"slot_id":..}] in rank order
  exit_codes      JSONB NOT NULL DEFAULT '{}',
  start_time      TIMESTAMPTZ NOT NULL DEFAULT now(),
  end_time        TIMESTAMPTZ
);
CREATE INDEX allocations_trial_idx ON allocations (trial_id);

-- Training and validation metrics. (trial, kind, batches, restart) is unique so a report that
-- is retried after a lost reply, or repeated after a restart, is stored once.
CREATE TABLE metrics (
  id              BIGSERIAL PRIMARY KEY,
  trial_id        BIGINT NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  kind            TEXT NOT NULL,
  batches         BIGINT NOT NULL,
  restart         INT NOT NULL DEFAULT 0,
  vals            JSONB NOT NULL,
  reported_at     TIMESTAMPTZ NOT NULL DEFAULT now(),
  UNIQUE (trial_id, kind, batches)
);
CREATE INDEX metrics_range_idx ON metrics (trial_id, kind, batches);

CREATE TABLE checkpoints (
  uuid            TEXT PRIMARY KEY,
  trial_id        BIGINT NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  batches         BIGINT NOT NULL,
  path            TEXT NOT NULL,
  size            BIGINT NOT NULL,
  files           JSONB NOT NULL DEFAULT '[]',
  metadata        JSONB NOT NULL DEFAULT '{}',
  validation_metric DOUBLE PRECISION,
  state           TEXT NOT NULL DEFAULT 'ACTIVE',
  reported_at     TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX checkpoints_trial_idx ON checkpoints (trial_id, batches);

CREATE TABLE task_logs (
  id              BIGSERIAL PRIMARY KEY,
  trial_id        BIGINT NOT NULL REFERENCES trials(id) ON DELETE CASCADE,
  rank            INT NOT NULL DEFAULT 0,
  stream          TEXT NOT NULL,
  message         TEXT NOT NULL,
  agent_id        TEXT NOT NULL DEFAULT '',
  logged_at       TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE INDEX task_logs_trial_idx ON task_logs (trial_id, id);

CREATE TABLE agents (
  id              TEXT PRIMARY KEY,
  hostname        TEXT NOT NULL DEFAULT '',
  resource_pool   TEXT NOT NULL DEFAULT 'default',
  slots           JSONB NOT NULL DEFAULT '[]',
  version         TEXT NOT NULL DEFAULT '',
  registered_at   TIMESTAMPTZ NOT NULL DEFAULT now(),
  last_heartbeat  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE cluster_info (
  key             TEXT PRIMARY KEY,
  value           TEXT NOT NULL
);
