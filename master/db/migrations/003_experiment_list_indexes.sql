-- Indexes for the experiment list (GET /api/v1/experiments, Api.GetExperiments), version 3.
--
-- The list reads one page of summaries (every column but config_yaml) filtered by archived,
-- state and a name substring, ordered by the chosen column with the id as tie-breaker
-- (Store::ListExperiments). Each index below lets PostgreSQL walk the rows in the page's order
-- and stop after LIMIT + OFFSET rows instead of sorting the whole table; descending sorts scan
-- them backwards. The name substring (strpos) is checked on the rows walked.

-- The default page: not archived, by id.
CREATE INDEX experiments_unarchived_id_idx ON experiments (id) WHERE NOT archived;
-- Filter by state (the dashboard's "active" views, ClusterPage), by id.
DROP INDEX IF EXISTS experiments_state_idx;
CREATE INDEX experiments_state_id_idx ON experiments (state, id);
-- The other sorts.
CREATE INDEX experiments_name_id_idx ON experiments (name, id);
CREATE INDEX experiments_start_time_id_idx ON experiments (start_time, id);
CREATE INDEX experiments_end_time_id_idx ON experiments (end_time, id);

-- Trials of an experiment by id (GET /api/v1/experiments/{id}/trials) and the per-experiment
-- trial counts of each list row (count of trials, of trials in a terminal state).
DROP INDEX IF EXISTS trials_experiment_idx;
CREATE INDEX trials_experiment_id_idx ON trials (experiment_id, id);
CREATE INDEX trials_experiment_state_idx ON trials (experiment_id, state);
