-- Only a kit says whether it writes heartbeats (it registers with the value). A row the plane writes about an
-- executor no kit registered — a declaration of death, a drain — says nothing about heartbeats, so it must not
-- turn an executor without the kit into one judged by a key it never writes: the default becomes false, and
-- rows no kit ever registered (no process start recorded) are corrected.
ALTER TABLE :SCHEMA:.executors ALTER COLUMN heartbeats SET DEFAULT false;
UPDATE :SCHEMA:.executors SET heartbeats = false WHERE started_at IS NULL AND heartbeats;
