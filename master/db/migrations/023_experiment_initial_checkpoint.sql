-- Version 23: a continued experiment (`sf experiment continue`) keeps the checkpoint its trials
-- start from in its own row, so a master that dies before the experiment's trial exists (or
-- before the searcher's first snapshot) gives the trial it creates after the restart the same
-- start. '' for every other experiment, and for the rows of earlier releases.
ALTER TABLE experiments ADD COLUMN initial_checkpoint TEXT NOT NULL DEFAULT '';
