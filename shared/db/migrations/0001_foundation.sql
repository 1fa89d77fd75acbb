-- afterlife's own schema. Append-only: never edit a migration that has shipped; add the next number.
-- :SCHEMA: is replaced by the configured (validated, quoted) schema name.

-- Every executor afterlife has heard of: from the kit's registration, a death notice, or the reaper.
CREATE TABLE :SCHEMA:.executors (
  application_name    text        NOT NULL,
  executor_id         text        NOT NULL,
  application_version text,
  state               text        NOT NULL CHECK (state IN ('alive', 'draining', 'drained', 'dead')),
  started_at          timestamptz,
  last_seen_at        timestamptz NOT NULL DEFAULT now(),
  state_changed_at    timestamptz NOT NULL DEFAULT now(),
  reason              text,
  detected_by         text,
  PRIMARY KEY (application_name, executor_id)
);
CREATE INDEX executors_state_idx ON :SCHEMA:.executors (application_name, state);

-- One row per recovery attempt of a dead executor (each delivery of a death notice that did work).
CREATE TABLE :SCHEMA:.recoveries (
  id                bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_name  text        NOT NULL,
  executor_id       text        NOT NULL,
  reason            text        NOT NULL,
  detected_by       text        NOT NULL,
  message_id        text,
  recovered_by      text        NOT NULL,
  lock_mode         text        NOT NULL CHECK (lock_mode IN ('locked', 'degraded')),
  started_at        timestamptz NOT NULL DEFAULT now(),
  finished_at       timestamptz,
  outcome           text        CHECK (outcome IN ('completed', 'partial', 'failed')),
  reenqueued        integer     NOT NULL DEFAULT 0,
  batches           integer     NOT NULL DEFAULT 0,
  versions          jsonb       NOT NULL DEFAULT '{}'::jsonb,
  versions_without_executor text[] NOT NULL DEFAULT '{}',
  error             text
);
CREATE INDEX recoveries_executor_idx ON :SCHEMA:.recoveries (application_name, executor_id, started_at DESC);

-- The workflow IDs each batch re-enqueued, written by the same statement that re-enqueued them,
-- so the audit can never disagree with what happened.
CREATE TABLE :SCHEMA:.recovery_batches (
  recovery_id         bigint      NOT NULL REFERENCES :SCHEMA:.recoveries (id) ON DELETE CASCADE,
  batch_no            integer     NOT NULL,
  application_version text,
  workflow_ids        text[]      NOT NULL,
  created_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (recovery_id, batch_no)
);

-- Single-flight leases (the reaper's), taken and renewed with conditional UPDATEs.
CREATE TABLE :SCHEMA:.leases (
  name        text        PRIMARY KEY,
  holder      text,
  expires_at  timestamptz NOT NULL DEFAULT '-infinity',
  acquired_at timestamptz
);
