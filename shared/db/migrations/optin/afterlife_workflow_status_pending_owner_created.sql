-- Opt-in (not applied by `migrate`): PENDING rows by owner, in the order recovery walks them. DBOS dropped
-- its index on executor_id, so "PENDING rows of this executor" reads every PENDING row through
-- idx_workflow_status_pending and then the heap. Keyed by (executor_id, application_version) for the
-- reaper's owner scans, then (created_at, workflow_uuid), the recovery batch's keyset order: a batch reads
-- exactly its own rows from the index and no sort, and the range read before it is an index-only scan.
-- The INCLUDE columns are the ones the reaper's cheap predicates and the recovery premise read.
-- Built CONCURRENTLY: it never blocks DBOS's writes. :DBOS_SCHEMA: is DBOS's schema; afterlife never
-- alters DBOS's tables otherwise.
-- supersedes: afterlife_workflow_status_pending_owner
CREATE INDEX CONCURRENTLY IF NOT EXISTS afterlife_workflow_status_pending_owner_created
    ON :DBOS_SCHEMA:.workflow_status (executor_id, application_version, created_at, workflow_uuid)
    INCLUDE (application_name, started_at_epoch_ms, updated_at)
    WHERE status = 'PENDING';
