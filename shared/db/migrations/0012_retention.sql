-- Retention of completed workflows and the global timeout (shared/retention, docs/retention.md). Append-only.

-- One row per application: the round in progress (so an invocation that ends mid-way hands its place to
-- the next) and what the last pass did (for `afterlife status`).
CREATE TABLE :SCHEMA:.retention_state (
  application_name  text        PRIMARY KEY,
  -- The round in progress: workflows that completed before cutoff_ms are examined in (completed_at,
  -- workflow_uuid) order; everything up to the watermark has been examined. NULL: no round in progress.
  round_started_at  timestamptz,
  cutoff_ms         bigint,
  watermark_ms      bigint,
  watermark_id      text,
  -- The last pass, as its summary (policy in force, deleted, timed out, stopped because).
  last_pass_at      timestamptz,
  last_pass         jsonb,
  -- Since the row was created (every pass adds to them).
  total_deleted     bigint      NOT NULL DEFAULT 0,
  total_timed_out   bigint      NOT NULL DEFAULT 0
);
