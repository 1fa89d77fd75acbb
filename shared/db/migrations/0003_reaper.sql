-- The reaper's own state. Append-only, like every migration.

-- What the reaper last saw of each executor it judges. Absence is persisted (not kept in memory) because
-- one Cloud Scheduler invocation ends every minute and another instance may run the next tick: an executor
-- is dead only when its evidence has been absent for long enough *across ticks*, so a Redis flush or restart
-- (every key gone at once, rewritten by the kits within TTL/3) never kills a fleet.
CREATE TABLE :SCHEMA:.executor_observations (
  application_name  text        NOT NULL,
  executor_id       text        NOT NULL,
  -- The last time the reaper saw this executor's heartbeat key: it has the kit, so absence of the key
  -- is evidence. NULL: never seen beating; only the no-kit rules (sessions, activity, grace) apply.
  last_beat_seen_at timestamptz,
  -- What is absent: 'heartbeat' (the key) or 'sessions' (dbos_transact_<id>_… in pg_stat_activity).
  evidence          text        CHECK (evidence IN ('heartbeat', 'sessions')),
  first_absent_at   timestamptz,
  last_absent_at    timestamptz,
  absent_ticks      integer     NOT NULL DEFAULT 0,
  -- When the reaper last declared it dead (published a notice or recovered inline): not re-declared every tick.
  declared_dead_at  timestamptz,
  PRIMARY KEY (application_name, executor_id)
);

-- Workflows PENDING on a live executor with no activity for STUCK_AFTER_MS: reported, and with the
-- cancel-and-fork policy cancelled (then forked once the fork module is wired).
CREATE TABLE :SCHEMA:.stuck_workflows (
  application_name    text        NOT NULL,
  workflow_uuid       text        NOT NULL,
  executor_id         text        NOT NULL,
  application_version text,
  workflow_name       text,
  last_activity_ms    bigint      NOT NULL,
  first_detected_at   timestamptz NOT NULL DEFAULT now(),
  last_detected_at    timestamptz NOT NULL DEFAULT now(),
  action              text        NOT NULL CHECK (action IN ('reported', 'cancelled', 'forked')),
  action_at           timestamptz,
  forked_to           text,
  PRIMARY KEY (application_name, workflow_uuid)
);
CREATE INDEX stuck_workflows_detected_idx ON :SCHEMA:.stuck_workflows (application_name, last_detected_at DESC);
