-- Crash detection on two witnesses (issue #9).

-- Whether the executor's kit holds a liveness lock (a session advisory lock, see shared/liveness). Only
-- then is a free lock evidence of death; kits from before it, or with AFTERLIFE_LIVENESS=off (a pooler in
-- transaction mode), are judged by their heartbeat alone.
ALTER TABLE :SCHEMA:.executors ADD COLUMN liveness boolean NOT NULL DEFAULT false;

-- The last tick any reaper completed, on the database clock: an invocation that takes the lease logs how
-- long nobody ticked (a gap between invocations, a dead holder, a database outage).
ALTER TABLE :SCHEMA:.leases ADD COLUMN last_tick_at timestamptz;

-- A third kind of absence: the liveness lock free while the heartbeat is stale (both witnesses agree).
ALTER TABLE :SCHEMA:.executor_observations DROP CONSTRAINT IF EXISTS executor_observations_evidence_check;
ALTER TABLE :SCHEMA:.executor_observations
  ADD CONSTRAINT executor_observations_evidence_check CHECK (evidence IN ('heartbeat', 'sessions', 'liveness'));
