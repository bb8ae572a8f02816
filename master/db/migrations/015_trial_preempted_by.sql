-- The trial whose request preempted this one (0: none): a preempted trial waits, once queued
-- again, with "preempted by trial N" until it runs; kept here so the reason survives a master
-- restart (docs/scheduling.md). Cleared when the trial runs again.
ALTER TABLE trials ADD COLUMN preempted_by BIGINT NOT NULL DEFAULT 0;
