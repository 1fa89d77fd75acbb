-- Whether an executor's kit writes heartbeats. A kit running without Redis registers with false, so the
-- reaper judges it by sessions and activity (like an executor without the kit) and never takes the
-- absence of a key it was never going to write as evidence of death.
ALTER TABLE :SCHEMA:.executors ADD COLUMN heartbeats boolean NOT NULL DEFAULT true;
