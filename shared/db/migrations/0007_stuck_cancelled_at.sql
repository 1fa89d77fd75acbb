-- cancel-and-fork: the completed_at the reaper's cancel wrote, so the sweep that forks leftovers of a
-- crashed reaper forks only a workflow whose CANCELLED is still the reaper's own (not an operator's
-- later cancel of a workflow that was resumed meanwhile).
ALTER TABLE :SCHEMA:.stuck_workflows ADD COLUMN cancelled_at_ms bigint;
