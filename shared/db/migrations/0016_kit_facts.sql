-- What each kit says about itself at registration, for `afterlife-plane doctor`: its own version,
-- the version of DBOS the app launched, and the lease the server has in force on its liveness session
-- (idle_session_timeout as that session reports it, read back after the kit set it). One JSON value with the
-- incarnation it describes, so a later process under the same executor ID never inherits an earlier one's.
-- NULL: a kit from before this column, or one that could not write it (doctor says so).
ALTER TABLE :SCHEMA:.executors ADD COLUMN kit_facts jsonb;

-- A kit that refused to attach because its liveness connection is not one Postgres session (a transaction-
-- or statement-mode pooler): it exits without registering, so this row is how doctor's pooler
-- check can name it. Written by the kit through its ordinary pool (one statement, which a pooler passes);
-- bounded: the kit's insert drops its application's rows older than 7 days.
CREATE TABLE :SCHEMA:.kit_refusals (
  application_name text        NOT NULL,
  executor_id      text        NOT NULL,
  incarnation      text        NOT NULL,
  reason           text        NOT NULL CHECK (length(reason) <= 100),
  detail           text        NOT NULL CHECK (length(detail) <= 2000),
  refused_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (application_name, executor_id, incarnation)
);
