-- afterlife's database grants: one role per function, each with what its code uses. Run by the owner
-- of both schemas after `afterlife-plane migrate` (the tables must exist), and again after a DBOS upgrade
-- that adds tables. Rendered by Terraform (iam.tf, output database_grants_sql) and run as-is by
-- test/integration/db/grants.test.ts. Schema names are validated identifiers; they are quoted anyway.
DO $$ BEGIN CREATE ROLE "${executor_death_role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE "${reaper_role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE "${drain_role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;

-- DBOS's tables. drain only reads them (progress reports). executorDeath re-enqueues (UPDATE) and, for
-- orphaned versions, forks, cancels and rewinds through DBOS's client; the reaper does the same for
-- diverged and stuck workflows, and runs retention, which deletes completed workflows: DELETE on every
-- table for the reaper only. executorDeath deletes no workflow (its role ran `afterlife-plane retention`
-- and deleted 14): a rewind in place (DBOS 5.3's rewindWorkflow, system_database.js) deletes the history
-- recorded from the cut on — steps, events and their history, stream close markers, messages, the output —
-- hence DELETE on those tables for it and on no other (never workflow_status or workflow_input). Taken back
-- first, so re-running this narrows a deployment granted by an earlier version.
GRANT USAGE ON SCHEMA "${dbos_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
GRANT SELECT ON ALL TABLES IN SCHEMA "${dbos_schema}" TO "${drain_role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${dbos_schema}" TO "${reaper_role}";
REVOKE DELETE, TRUNCATE ON ALL TABLES IN SCHEMA "${dbos_schema}" FROM "${executor_death_role}";
GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA "${dbos_schema}" TO "${executor_death_role}";
DO $$
DECLARE t text;
BEGIN
  -- Only those this DBOS version has (workflow_events_history and streams are newer than some schemas afterlife accepts).
  FOREACH t IN ARRAY ARRAY['operation_outputs', 'workflow_events', 'workflow_events_history', 'streams', 'notifications', 'workflow_output'] LOOP
    IF to_regclass(format('%I.%I', '${dbos_schema}', t)) IS NOT NULL THEN
      EXECUTE format('GRANT DELETE ON %I.%I TO %I', '${dbos_schema}', t, '${executor_death_role}');
    END IF;
  END LOOP;
END $$;
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "${dbos_schema}" TO "${executor_death_role}", "${reaper_role}";

-- Tables created in DBOS's schema after this ran: a DBOS upgrade's migrations, and dbos.transaction_completion,
-- which the app's data source creates on first use. They get what every table gets above (executorDeath no
-- DELETE: a table a later DBOS rewinds from is granted by rerunning this file). Default privileges apply to what one role creates, so they
-- are set FOR ROLE every role that can create tables there: the schema's owner and every role with CREATE on
-- it (the app's database user, which DBOS migrates with at launch, and a data source's user; on the local stack
-- the superuser). Acting for a role needs membership in it: a role this runner cannot act for is named in a
-- WARNING (rerun this file as that role), and `afterlife-plane doctor` lists every table a role still lacks.
DO $$
DECLARE r record;
BEGIN
  FOR r IN SELECT a.rolname FROM pg_roles a
            WHERE left(a.rolname, 3) <> 'pg_' AND has_schema_privilege(a.oid, (SELECT n.oid FROM pg_namespace n WHERE n.nspname = '${dbos_schema}'), 'CREATE')
  LOOP
    BEGIN
      EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT ON TABLES TO %I', r.rolname, '${dbos_schema}', '${drain_role}');
      EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I',
        r.rolname, '${dbos_schema}', '${reaper_role}');
      EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT SELECT, INSERT, UPDATE ON TABLES TO %I',
        r.rolname, '${dbos_schema}', '${executor_death_role}');
      EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE %I IN SCHEMA %I GRANT USAGE, SELECT ON SEQUENCES TO %I, %I',
        r.rolname, '${dbos_schema}', '${executor_death_role}', '${reaper_role}');
    EXCEPTION WHEN insufficient_privilege THEN
      RAISE WARNING 'afterlife grants: tables role % creates later in schema % get no grants: rerun this file as %', r.rolname, '${dbos_schema}', r.rolname;
    END;
  END LOOP;
END $$;

-- afterlife's own tables, per table (docs/threat-model.md): drain writes only drain requests;
-- only executorDeath and the reaper write the registry and the audit, only the reaper its lease, the
-- observations and the stuck-workflow records; nobody but the owner writes migrations. Every grant of an
-- earlier version of this file is taken back first, so re-running it narrows an existing deployment.
-- test/integration/db/grantsMatrix.test.ts tries every write on every table as each role.
GRANT USAGE ON SCHEMA "${afterlife_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
REVOKE ALL ON ALL TABLES IN SCHEMA "${afterlife_schema}" FROM "${executor_death_role}", "${reaper_role}", "${drain_role}";
ALTER DEFAULT PRIVILEGES IN SCHEMA "${afterlife_schema}" REVOKE ALL ON TABLES FROM "${executor_death_role}", "${reaper_role}", "${drain_role}";
GRANT SELECT ON ALL TABLES IN SCHEMA "${afterlife_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "${afterlife_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
-- drain names the target, the budget and itself; the date is the insert's own now() (a request
-- dated `infinity` drained every later executor of its version), and migration 0015 bounds the rest.
GRANT INSERT (application_name, executor_id, application_version, budget_ms, requested_by) ON "${afterlife_schema}".drain_requests TO "${drain_role}";
GRANT INSERT, UPDATE ON "${afterlife_schema}".executors, "${afterlife_schema}".recoveries, "${afterlife_schema}".recovery_batches,
  "${afterlife_schema}".forks, "${afterlife_schema}".dead_letters, "${afterlife_schema}".rewinds TO "${executor_death_role}";
GRANT DELETE ON "${afterlife_schema}".forks TO "${executor_death_role}";
-- Recovery timelines: a recovery opens or joins one, and deletes the one it opened when the death
-- turns out a false alarm; both functions recover.
GRANT INSERT, UPDATE, DELETE ON "${afterlife_schema}".timelines TO "${executor_death_role}", "${reaper_role}";
GRANT INSERT, UPDATE, DELETE ON "${afterlife_schema}".executors, "${afterlife_schema}".recoveries, "${afterlife_schema}".recovery_batches,
  "${afterlife_schema}".leases, "${afterlife_schema}".executor_observations, "${afterlife_schema}".stuck_workflows,
  "${afterlife_schema}".forks, "${afterlife_schema}".dead_letters, "${afterlife_schema}".rewinds TO "${reaper_role}";
-- The reaper may prune drain requests (retention); it never writes one.
GRANT DELETE ON "${afterlife_schema}".drain_requests TO "${reaper_role}";
-- Retention's round and last pass (docs/retention.md): the reaper runs the pass.
GRANT INSERT, UPDATE ON "${afterlife_schema}".retention_state TO "${reaper_role}";
-- Redis's identity as the reaper last saw it: whether Redis lost its keys; only the reaper judges.
GRANT INSERT, UPDATE ON "${afterlife_schema}".redis_witness TO "${reaper_role}";
-- Tables a later migration adds: readable by all three; who writes them is decided here, per table.
ALTER DEFAULT PRIVILEGES IN SCHEMA "${afterlife_schema}" GRANT SELECT ON TABLES TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
ALTER DEFAULT PRIVILEGES IN SCHEMA "${afterlife_schema}" GRANT USAGE, SELECT ON SEQUENCES TO "${executor_death_role}", "${reaper_role}", "${drain_role}";

-- Each function's database user gets its own role (with password auth all three are one user).
GRANT "${executor_death_role}" TO "${executor_death_user}";
GRANT "${reaper_role}" TO "${reaper_user}";
GRANT "${drain_role}" TO "${drain_user}";
