-- Commands (`sf cmd run`, docs/tasks.md): a task that runs a program once. Its working
-- directory's files travel as an experiment's context does (migration 010), and its exit status
-- is kept for `sf cmd run` to exit with. A command that exited 0 is COMPLETED.
CREATE TABLE task_contexts (
  task_id         BIGINT PRIMARY KEY REFERENCES tasks(id) ON DELETE CASCADE,
  archive         BYTEA NOT NULL,
  sha256          TEXT NOT NULL
);
ALTER TABLE tasks ADD COLUMN exit_code INT;  -- rank 0's, once a command ended with one
DROP INDEX tasks_live_idx;
CREATE INDEX tasks_live_idx ON tasks (id) WHERE state NOT IN ('STOPPED', 'FAILED', 'COMPLETED');
