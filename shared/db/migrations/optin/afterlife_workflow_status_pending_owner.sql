-- Opt-in (not applied by `migrate`): the reaper's PENDING rows by owner. DBOS dropped its index on
-- executor_id, so "PENDING rows of these executors" reads every PENDING row through
-- idx_workflow_status_pending and then the heap; this partial index answers the owner scans from the
-- index alone (the INCLUDE columns are the ones the reaper's cheap predicates read).
-- Built CONCURRENTLY: it never blocks DBOS's writes. :DBOS_SCHEMA: is DBOS's schema; afterlife never
-- alters DBOS's tables otherwise.
CREATE INDEX CONCURRENTLY IF NOT EXISTS afterlife_workflow_status_pending_owner
    ON :DBOS_SCHEMA:.workflow_status (executor_id, application_version)
    INCLUDE (application_name, started_at_epoch_ms, updated_at, created_at)
    WHERE status = 'PENDING';
