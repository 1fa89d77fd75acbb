-- Who holds the liveness lock: the backend pid of the kit's liveness session, written by
-- that session in the statement that takes the lock. The reaper and every recovery batch count the lock as
-- held only when this session holds it: a lock taken by anything else (a squatter, a stale session of an
-- earlier incarnation) is reported and read as free, never as life. NULL: no lock taken by this incarnation.
ALTER TABLE :SCHEMA:.executors ADD COLUMN liveness_pid integer;
