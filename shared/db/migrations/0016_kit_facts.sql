-- What each kit says about itself at registration (issue 27), for `afterlife-plane doctor`: its own version,
-- the version of DBOS the app launched, and the lease the server has in force on its liveness session
-- (idle_session_timeout as that session reports it, read back after the kit set it). One JSON value with the
-- incarnation it describes, so a later process under the same executor ID never inherits an earlier one's.
-- NULL: a kit from before this column, or one that could not write it (doctor says so).
ALTER TABLE :SCHEMA:.executors ADD COLUMN kit_facts jsonb;
