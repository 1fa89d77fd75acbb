-- Recovery timelines: one row per death, opened by the statement that starts its first recovery
-- (shared/db/queries/recoveries.ts, so recording it costs the recovery no round trip) and closed once by
-- the reaper when every moved workflow has started elsewhere, or a bound passes (shared/timeline).
-- Append-only.
CREATE TABLE :SCHEMA:.timelines (
  id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_name        text        NOT NULL,
  executor_id             text        NOT NULL,
  -- The process start the death was about; '' when unknown (executors without the kit, older kits), so
  -- the open-timeline key below is a plain unique key.
  incarnation             text        NOT NULL DEFAULT '',
  cause                   text        NOT NULL CHECK (cause IN ('crash', 'lost-host', 'sigterm', 'drain', 'manual')),
  last_sign_of_life_at    timestamptz,
  declared_at             timestamptz NOT NULL,
  -- When a death notice reached executorDeath (its first recovery carried a message ID); NULL: no notice.
  notice_at               timestamptz,
  -- The recoveries of this death: every recovery row of the executor and incarnation from first_recovery_id on.
  first_recovery_id       bigint      NOT NULL,
  last_recovery_id        bigint      NOT NULL,
  -- Filled when closed (the reaper's timeline pass).
  first_reenqueued_at     timestamptz,
  last_reenqueued_at      timestamptz,
  first_step_elsewhere_at timestamptz,
  all_started_at          timestamptz,
  reenqueued              integer,
  tracked                 integer,
  started                 integer,
  closed_at               timestamptz,
  closed_because          text        CHECK (closed_because IN ('all-started', 'nothing-moved', 'bound'))
);
-- One open timeline per executor and incarnation: a redelivered notice joins the death it is about.
CREATE UNIQUE INDEX timelines_open_key ON :SCHEMA:.timelines (application_name, executor_id, incarnation) WHERE closed_at IS NULL;
CREATE INDEX timelines_declared_idx ON :SCHEMA:.timelines (application_name, declared_at DESC);
CREATE INDEX timelines_executor_idx ON :SCHEMA:.timelines (application_name, executor_id, id DESC);
