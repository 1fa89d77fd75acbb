-- Incarnations: each process start of an executor ID is a new incarnation, a random ID the kit
-- makes at attach. Registration of a new incarnation takes the row over (a dead or drained ID can be used
-- again); a declaration of death names the incarnation it is about, so it never lands on a newer one; the
-- kit fences itself when the row names a newer incarnation than its own. NULL: a kit from before this.
ALTER TABLE :SCHEMA:.executors ADD COLUMN incarnation text;
-- The incarnation a recovery was about (from the death notice), for the audit.
ALTER TABLE :SCHEMA:.recoveries ADD COLUMN incarnation text;
