-- Cluster utilisation history, version 2: what the dashboard's "Busy slots" chart and
-- GET /api/v1/cluster/utilization read, so the chart is full after a reload or a master restart.
--
-- One row per resource pool per minute, written by the master's UtilizationRecorder
-- (master/core/utilization_recorder.h), which samples the connected agents' slots every
-- `utilization_sample_seconds` and folds each sample into its minute's row:
--   slots_total  the most enabled slots of connected agents seen during the minute
--   busy_avg     the mean of the busy-slot counts sampled during the minute
--   busy_max     the largest busy-slot count sampled during the minute
--   samples      how many samples went into the row (the running mean's weight)
-- Rows older than `utilization_retention_hours` are deleted by the recorder. At the default
-- 168 hours that is at most 10,080 rows per pool (about 1.5 MB per pool, indexes included).
CREATE TABLE cluster_utilization (
  pool            TEXT NOT NULL,
  minute          TIMESTAMPTZ NOT NULL,          -- the start of the minute (UTC, seconds = 0)
  slots_total     INT NOT NULL,
  busy_avg        DOUBLE PRECISION NOT NULL,
  busy_max        INT NOT NULL,
  samples         INT NOT NULL,
  PRIMARY KEY (pool, minute)
);
-- Reads and pruning go by time across pools.
CREATE INDEX cluster_utilization_minute_idx ON cluster_utilization (minute);
