-- Version 22: rendezvous rounds survive a master restart (master/rendezvous/rendezvous_journal.h).
-- One row per rank's payload in a round of an allocation; `seq` orders the rounds as first
-- recorded. The rows go with their allocation's row.
CREATE TABLE rendezvous_payloads (
  allocation_id TEXT NOT NULL REFERENCES allocations(id) ON DELETE CASCADE,
  round         TEXT NOT NULL,
  rank          INT NOT NULL,
  payload       BYTEA NOT NULL,
  seq           BIGSERIAL,
  PRIMARY KEY (allocation_id, round, rank)
);
