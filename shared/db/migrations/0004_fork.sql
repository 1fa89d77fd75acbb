-- Auto-fork of diverged workflows (shared/fork). Append-only.

-- The fork ledger: one row per fork afterlife made or found made (n = position in the lineage of the
-- root workflow). Written after the fork committed; the fork ID is deterministic, so a retry that hits the
-- primary key of DBOS's workflow_status re-records the same row here (ON CONFLICT DO NOTHING).
CREATE TABLE :SCHEMA:.forks (
  root_workflow_id     text        NOT NULL,
  n                    integer     NOT NULL CHECK (n >= 1),
  application_name     text        NOT NULL,
  source_workflow_id   text        NOT NULL,
  from_step            integer     NOT NULL,
  new_workflow_id      text        NOT NULL UNIQUE,
  application_version  text,
  reason               text        NOT NULL CHECK (reason IN ('diverged', 'child-diverged', 'orphaned-version')),
  diverged_workflow_id text,
  detail               text,
  forked_by            text        NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  -- For fork-to-latest: when the original was cancelled (NULL = still to do), so two lineages never run.
  original_cancelled_at timestamptz,
  -- A child forked afresh together with this fork (the child had an app-chosen ID), and, for a fork of a
  -- child, the fork that awaits it. Forks carry no parent_workflow_id, so the diverged pass reads these to
  -- leave such children to their parent instead of forking them on their own.
  child_fork_id        text,
  awaited_by           text,
  PRIMARY KEY (root_workflow_id, n)
);
CREATE INDEX forks_child_fork_idx ON :SCHEMA:.forks (child_fork_id) WHERE child_fork_id IS NOT NULL;
CREATE INDEX forks_app_idx ON :SCHEMA:.forks (application_name, created_at DESC);

-- Lineages that exhausted their forks. One row per root; the dead-letter message is published by whoever
-- claims `publish_claimed_at` (the inserter, or a retry after the claim went stale) and then stamped.
CREATE TABLE :SCHEMA:.dead_letters (
  root_workflow_id   text        PRIMARY KEY,
  application_name   text        NOT NULL,
  workflow_id        text        NOT NULL,
  forks              integer     NOT NULL,
  reason             text        NOT NULL,
  error              text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  publish_claimed_at timestamptz NOT NULL DEFAULT now(),
  published_at       timestamptz,
  message_id         text
);
CREATE INDEX dead_letters_app_idx ON :SCHEMA:.dead_letters (application_name, created_at DESC);
CREATE INDEX dead_letters_workflow_idx ON :SCHEMA:.dead_letters (workflow_id);
