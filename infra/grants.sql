-- afterlife's database grants: one role per function, each with what its code uses. Run by the owner
-- of both schemas after `afterlife migrate` (the tables must exist), and again after a DBOS upgrade
-- that adds tables. Rendered by Terraform (iam.tf, output database_grants_sql) and run as-is by
-- test/integration/db/grants.test.ts. Schema names are validated identifiers; they are quoted anyway.
DO $$ BEGIN CREATE ROLE "${executor_death_role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE "${reaper_role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;
DO $$ BEGIN CREATE ROLE "${drain_role}" NOLOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$;

-- DBOS's tables. drain only reads them (progress reports). executorDeath re-enqueues (UPDATE) and, for
-- orphaned versions, forks, cancels and rewinds through DBOS's client; the reaper does the same for
-- diverged and stuck workflows. A rewind deletes the recorded history from the cut on (operation_outputs,
-- workflow_events, notifications, …), hence DELETE for those two and for them only.
GRANT USAGE ON SCHEMA "${dbos_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
GRANT SELECT ON ALL TABLES IN SCHEMA "${dbos_schema}" TO "${drain_role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${dbos_schema}" TO "${executor_death_role}", "${reaper_role}";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "${dbos_schema}" TO "${executor_death_role}", "${reaper_role}";

-- afterlife's own tables: registry, audit, forks, dead letters, drain requests, the reaper's lease.
GRANT USAGE ON SCHEMA "${afterlife_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "${afterlife_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA "${afterlife_schema}" TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
ALTER DEFAULT PRIVILEGES IN SCHEMA "${afterlife_schema}" GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO "${executor_death_role}", "${reaper_role}", "${drain_role}";
ALTER DEFAULT PRIVILEGES IN SCHEMA "${afterlife_schema}" GRANT USAGE, SELECT ON SEQUENCES TO "${executor_death_role}", "${reaper_role}", "${drain_role}";

-- Each function's database user gets its own role (with password auth all three are one user).
GRANT "${executor_death_role}" TO "${executor_death_user}";
GRANT "${reaper_role}" TO "${reaper_user}";
GRANT "${drain_role}" TO "${drain_user}";
