-- An allocation another resource manager placed (master/rm/resource_manager.h) carries that
-- manager's id for it: the Slurm job id. A restarted master adopts the job by it
-- (docs/slurm.md "Master restarts"); empty for allocations on agents.
ALTER TABLE allocations ADD COLUMN external_id TEXT NOT NULL DEFAULT '';
