-- Version 21: an experiment's trial counts live in its row. The experiment list (a page of 100,
-- read hundreds of times a second by dashboards) counted every experiment's trials twice per
-- row, and on a cluster busy starting trials those index scans fetch heap rows the metric
-- writer keeps dirtying: half of PostgreSQL's CPU under bench/sim's queue10k. A trigger keeps
-- the counts, so every path that adds a trial or ends one (the coordinator, recovery, psql)
-- keeps them true in its own transaction.
--
-- Locks: only an INSERT, or an UPDATE that moves a trial into or out of an ended state, touches
-- the experiment's row — twice in a trial's life — each in its one-statement transaction.
ALTER TABLE experiments
  ADD COLUMN num_trials INT NOT NULL DEFAULT 0,
  ADD COLUMN num_ended_trials INT NOT NULL DEFAULT 0;

UPDATE experiments e SET
  num_trials = c.n,
  num_ended_trials = c.ended
FROM (SELECT experiment_id, count(*) AS n,
             count(*) FILTER (WHERE state IN ('COMPLETED', 'CANCELED', 'ERROR')) AS ended
      FROM trials GROUP BY experiment_id) c
WHERE c.experiment_id = e.id;

CREATE FUNCTION trial_ended(state TEXT) RETURNS BOOLEAN IMMUTABLE LANGUAGE sql AS
  $$ SELECT state IN ('COMPLETED', 'CANCELED', 'ERROR') $$;

CREATE FUNCTION count_new_trial() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE experiments SET num_trials = num_trials + 1,
                         num_ended_trials = num_ended_trials + trial_ended(NEW.state)::int
  WHERE id = NEW.experiment_id;
  RETURN NULL;
END $$;

CREATE FUNCTION count_ended_trial() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE experiments SET num_ended_trials = num_ended_trials + CASE WHEN trial_ended(NEW.state) THEN 1 ELSE -1 END
  WHERE id = NEW.experiment_id;
  RETURN NULL;
END $$;

CREATE TRIGGER trials_counted AFTER INSERT ON trials
  FOR EACH ROW EXECUTE FUNCTION count_new_trial();
CREATE TRIGGER trials_ended_counted AFTER UPDATE OF state ON trials
  FOR EACH ROW WHEN (trial_ended(OLD.state) IS DISTINCT FROM trial_ended(NEW.state))
  EXECUTE FUNCTION count_ended_trial();
