-- What Database::WaitForDurability writes, version 20: a commit waits for the WAL flush only when
-- its transaction wrote WAL, so the wait upserts its session's row here (one row per server
-- backend: concurrent waits never queue on one row's lock) and commits with synchronous_commit
-- on; the flush covers every commit before it, including those made under a DeferredFlush.
CREATE TABLE durability_marks (
  backend_pid INT PRIMARY KEY,
  waits BIGINT NOT NULL DEFAULT 0
);
