-- Planned drains (the drain function writes, the executor kit reads on every beat). Kept in Postgres rather
-- than Redis so that a deploy pipeline can drain a version even while Redis is down.
-- A request targets one executor, or every executor of one application version (including ones that start
-- after the request: a v1 instance scaled up mid-deploy must drain too).
CREATE TABLE :SCHEMA:.drain_requests (
  id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  application_name    text        NOT NULL,
  executor_id         text,
  application_version text,
  budget_ms           integer     NOT NULL CHECK (budget_ms > 0),
  requested_by        text,
  requested_at        timestamptz NOT NULL DEFAULT now(),
  CHECK ((executor_id IS NULL) <> (application_version IS NULL))
);
CREATE INDEX drain_requests_executor_idx ON :SCHEMA:.drain_requests (application_name, executor_id) WHERE executor_id IS NOT NULL;
CREATE INDEX drain_requests_version_idx ON :SCHEMA:.drain_requests (application_name, application_version) WHERE application_version IS NOT NULL;
