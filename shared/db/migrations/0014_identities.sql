-- Identities that cannot be borrowed.
--
-- The liveness holder: a backend pid is reused once its session ends, so the kit's session is recorded by
-- pid, role and start time together (the statement that takes the lock writes all three). A lock held by
-- a backend with the kit's pid but another role or start time is a stranger's: read as free, reported.
-- NULL role and start: a kit from before this migration, read by pid alone as before.
ALTER TABLE :SCHEMA:.executors ADD COLUMN liveness_usesysid oid, ADD COLUMN liveness_backend_start timestamptz;

-- The incarnation a new process with the same executor ID took the row from while it was still live: its
-- PENDING work is recovered once its own lease is gone, whether the ID is alive again or not. Written by
-- the registration that supersedes it; cleared by the superseding kit once its sweep finds nothing of the
-- old process left PENDING (packages/executor/src/executor/superseded.ts; a comment, no schema change).
ALTER TABLE :SCHEMA:.executors ADD COLUMN superseded_incarnation text, ADD COLUMN superseded_pid integer,
  ADD COLUMN superseded_backend_start timestamptz, ADD COLUMN superseded_at timestamptz;

-- Redis's own identity (INFO server: run_id, uptime), as the reaper last saw it, per application. Whether
-- Redis lost its keys is decided from this, never from a key any client with the Redis URL can write.
-- keys_since: since when this Redis is known to have kept its keys (its start, or the last loss seen).
CREATE TABLE :SCHEMA:.redis_witness (
  application_name text PRIMARY KEY,
  run_id text NOT NULL,
  keys_since timestamptz NOT NULL,
  seen_at timestamptz NOT NULL DEFAULT now()
);
