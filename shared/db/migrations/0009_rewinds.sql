-- Repair in place (shared/fork/rewind.ts): DBOS 5.3's rewindWorkflow re-enqueues a terminal workflow
-- under its own ID from a step on. Append-only.

-- The rewind ledger: one row per rewind afterlife made (or is making). A rewind's n is the lineage's
-- repairs before it (its forks, counted by DBOS's forked_from chain, plus its rewinds here) + 1, so
-- MAX_REPAIRS bounds forks and rewinds together; forks keep their chain-depth n, which their IDs carry.
-- A rewind leaves no trace in DBOS's tables (same ID, recovery_attempts reset): this row is its only count.
--
-- incarnation_ms is the completed_at of the terminal state being repaired: a rewind clears completed_at
-- and a later ending writes a new one, so (workflow_id, incarnation_ms) names one repair of one ending.
-- Unique, so racing repairers of the same ending insert one row and only its claimer rewinds. The row
-- goes first (an intent); a claimer that died before its rewind leaves claimed_at to go stale, and the
-- next pass re-checks the ending and takes the claim over.
CREATE TABLE :SCHEMA:.rewinds (
  root_workflow_id     text        NOT NULL,
  n                    integer     NOT NULL CHECK (n >= 1),
  application_name     text        NOT NULL,
  workflow_id          text        NOT NULL,
  incarnation_ms       bigint      NOT NULL,
  from_step            integer     NOT NULL CHECK (from_step >= 0),
  application_version  text,
  reason               text        NOT NULL CHECK (reason IN ('diverged', 'child-diverged', 'orphaned-version', 'stuck')),
  diverged_workflow_id text,
  detail               text,
  -- Descendants rewound before this workflow (a parent whose child diverged): [{workflowId, fromStep, incarnationMs}].
  descendants          jsonb,
  rewound_by           text        NOT NULL,
  created_at           timestamptz NOT NULL DEFAULT now(),
  claimed_at           timestamptz NOT NULL DEFAULT now(),
  rewound_at           timestamptz,
  PRIMARY KEY (root_workflow_id, n),
  UNIQUE (workflow_id, incarnation_ms)
);
CREATE INDEX rewinds_app_idx ON :SCHEMA:.rewinds (application_name, created_at DESC);

-- Every repair of a lineage, whichever way it was made: what an operator reads.
CREATE VIEW :SCHEMA:.repairs AS
  SELECT root_workflow_id, n, application_name, 'fork'::text AS mode, source_workflow_id AS workflow_id,
         new_workflow_id AS repaired_as, from_step, reason, detail, created_at
    FROM :SCHEMA:.forks
  UNION ALL
  SELECT root_workflow_id, n, application_name, 'rewind'::text AS mode, workflow_id,
         workflow_id AS repaired_as, from_step, reason, detail, created_at
    FROM :SCHEMA:.rewinds;

-- STUCK_POLICY=cancel-and-repair: a stuck workflow the reaper cancelled and rewound goes on under its own ID.
ALTER TABLE :SCHEMA:.stuck_workflows DROP CONSTRAINT stuck_workflows_action_check;
ALTER TABLE :SCHEMA:.stuck_workflows ADD CONSTRAINT stuck_workflows_action_check CHECK (action IN ('reported', 'cancelled', 'forked', 'rewound'));
