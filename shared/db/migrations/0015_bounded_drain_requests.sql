-- Drain requests say only what the drain function writes. The drain role could insert a request
-- dated `infinity`: every later executor of that version drained at start, and the 90-day prune never
-- removed the row. infra/grants.sql now lets that role name only the columns the function writes (the date
-- is always the insert's now()); this bounds the rest: a finite date, the function's budget range (1 s to
-- 24 h, shared/drain's DrainPostBody), and names no longer than the function accepts. Rows that break a
-- bound were not written by the function (it cannot): they are dropped, so the constraint holds for all.
DELETE FROM :SCHEMA:.drain_requests
 WHERE NOT (requested_at > '-infinity' AND requested_at < 'infinity' AND requested_at <= now() + interval '1 hour'
            AND budget_ms BETWEEN 1000 AND 86400000
            AND length(application_name) <= 512 AND COALESCE(length(executor_id), 0) <= 512
            AND COALESCE(length(application_version), 0) <= 512 AND COALESCE(length(requested_by), 0) <= 512);
ALTER TABLE :SCHEMA:.drain_requests
  ADD CONSTRAINT drain_requests_bounded CHECK (
    requested_at > '-infinity' AND requested_at < 'infinity'
    AND budget_ms BETWEEN 1000 AND 86400000
    AND length(application_name) <= 512 AND length(executor_id) <= 512
    AND length(application_version) <= 512 AND length(requested_by) <= 512);
