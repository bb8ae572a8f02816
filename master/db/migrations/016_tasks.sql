-- Tasks that are not an experiment's trials (docs/cluster.md, "Allocations and tasks";
-- master/tasks/task_coordinator.h): a server (sf serve start) today, commands and notebooks
-- next. A task is scheduled, restarted and stopped on its own; its allocations and its output
-- lines name it instead of a trial.
CREATE TABLE tasks (
  id              BIGSERIAL PRIMARY KEY,
  kind            TEXT NOT NULL,                -- SERVER
  state           TEXT NOT NULL,                -- QUEUED, RUNNING, STOPPING, STOPPED, FAILED
  owner           TEXT NOT NULL,
  workspace_id    BIGINT NOT NULL REFERENCES workspaces(id),
  -- What it runs (the program and its arguments) and how it is placed.
  entrypoint      JSONB NOT NULL DEFAULT '[]',
  slots           INT NOT NULL DEFAULT 1,
  resource_pool   TEXT NOT NULL DEFAULT 'default',
  priority        INT NOT NULL DEFAULT 42,
  max_restarts    INT NOT NULL DEFAULT 5,
  restarts        INT NOT NULL DEFAULT 0,       -- times it was started again after a failure
  allocations     INT NOT NULL DEFAULT 0,       -- allocations made so far (an id is never reused)
  error           TEXT NOT NULL DEFAULT '',
  -- Where it answers, as its process reported it (TrialLink ReportEndpoint), and the allocation
  -- that reported it: the URL is current only while that allocation runs. The servings row's
  -- url columns (migration 013) are no longer written.
  url             TEXT NOT NULL DEFAULT '',
  url_allocation  TEXT NOT NULL DEFAULT '',
  created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
  end_time        TIMESTAMPTZ
);
CREATE INDEX tasks_live_idx ON tasks (id) WHERE state NOT IN ('STOPPED', 'FAILED');

-- An allocation, and a line of output, belongs to a trial or to a task, never both.
ALTER TABLE allocations ALTER COLUMN trial_id DROP NOT NULL,
  ADD COLUMN task_id BIGINT REFERENCES tasks(id) ON DELETE CASCADE;
ALTER TABLE allocations ADD CONSTRAINT allocations_one_owner CHECK ((trial_id IS NULL) <> (task_id IS NULL));
CREATE INDEX allocations_task_idx ON allocations (task_id) WHERE task_id IS NOT NULL;
ALTER TABLE task_logs ALTER COLUMN trial_id DROP NOT NULL,
  ADD COLUMN task_id BIGINT REFERENCES tasks(id) ON DELETE CASCADE;
-- Every row so far has its trial: not re-checked (a large log table is not scanned at start).
ALTER TABLE task_logs ADD CONSTRAINT task_logs_one_owner CHECK ((trial_id IS NULL) <> (task_id IS NULL)) NOT VALID;
CREATE INDEX task_logs_task_idx ON task_logs (task_id, id) WHERE task_id IS NOT NULL;

-- Servers were carried by an experiment of their own (migration 013). Each becomes a task; the
-- old experiment stays (its trial's logs and allocations are its history) and is still left out
-- of the experiment list through legacy_experiment_id. A server live at the upgrade is stopped
-- (its experiment CANCELED; an agent still running it kills it when it reconnects): start it
-- again with sf serve start.
ALTER TABLE servings ADD COLUMN task_id BIGINT REFERENCES tasks(id) ON DELETE CASCADE;
ALTER TABLE servings DROP CONSTRAINT servings_pkey;
ALTER TABLE servings RENAME COLUMN experiment_id TO legacy_experiment_id;
ALTER TABLE servings ALTER COLUMN legacy_experiment_id DROP NOT NULL;
DO $$
DECLARE
  s RECORD;
  new_id BIGINT;
BEGIN
  FOR s IN SELECT v.legacy_experiment_id AS experiment_id, v.slots, v.resource_pool, v.created_at,
                  e.owner, e.workspace_id, e.state, e.error, e.end_time
           FROM servings v JOIN experiments e ON e.id = v.legacy_experiment_id
           ORDER BY v.legacy_experiment_id LOOP
    INSERT INTO tasks (kind, state, owner, workspace_id, slots, resource_pool, error, created_at, end_time)
    VALUES ('SERVER', CASE WHEN s.state = 'ERROR' THEN 'FAILED' ELSE 'STOPPED' END, s.owner, s.workspace_id,
            s.slots, s.resource_pool,
            CASE WHEN s.state IN ('COMPLETED', 'CANCELED', 'ERROR') THEN s.error
                 ELSE 'stopped by the upgrade that made servers tasks of their own (migration 016): start it again' END,
            s.created_at, COALESCE(s.end_time, now()))
    RETURNING id INTO new_id;
    UPDATE servings SET task_id = new_id WHERE legacy_experiment_id = s.experiment_id;
  END LOOP;
END $$;
UPDATE trials SET state = 'CANCELED', end_time = COALESCE(end_time, now())
  WHERE experiment_id IN (SELECT legacy_experiment_id FROM servings)
    AND state NOT IN ('COMPLETED', 'CANCELED', 'ERROR');
UPDATE experiments SET state = 'CANCELED', end_time = COALESCE(end_time, now())
  WHERE id IN (SELECT legacy_experiment_id FROM servings)
    AND state NOT IN ('COMPLETED', 'CANCELED', 'ERROR');
ALTER TABLE servings ALTER COLUMN task_id SET NOT NULL;
ALTER TABLE servings ADD PRIMARY KEY (task_id);
CREATE INDEX servings_legacy_idx ON servings (legacy_experiment_id) WHERE legacy_experiment_id IS NOT NULL;
