-- The searcher has closed the trial (it gets no more operations), version 19: set when the
-- searcher's Close reaches a trial whose allocation still runs, so that its exit completes it.
-- Kept in memory only before, a master restart between the Close and the exit forgot it: the
-- exit then queued the trial again for an operation the searcher (whose snapshot had it closed)
-- would never give, and it waited for ever ("waiting for the searcher's next operation").
ALTER TABLE trials ADD COLUMN closing BOOLEAN NOT NULL DEFAULT false;
