-- Which sign of life a timeline starts at (the executor's own notice, its last heartbeat, its last session or
-- checkpoint for an executor without the kit, or only the declaration), so an operator reads the figures
-- knowing what they are measured from; and `vanished`, the cause of a death read off sessions that ended
-- (without the kit the plane cannot tell a crash from a SIGTERM or a lost host).
ALTER TABLE :SCHEMA:.timelines ADD COLUMN last_sign_of_life_source text
  CHECK (last_sign_of_life_source IN ('notice', 'heartbeat', 'session', 'checkpoint', 'declaration'));
ALTER TABLE :SCHEMA:.timelines DROP CONSTRAINT timelines_cause_check;
ALTER TABLE :SCHEMA:.timelines ADD CONSTRAINT timelines_cause_check
  CHECK (cause IN ('crash', 'lost-host', 'sigterm', 'drain', 'manual', 'vanished'));
