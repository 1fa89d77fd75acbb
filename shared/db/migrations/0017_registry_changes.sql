-- Which registry rows changed, without reading them all. The reaper ticks four times a second and
-- read every live executor's row each tick: at a thousand executors, a thousand rows a tick for rows that
-- change a few times in a process's life (its registration, its lock's holder, its state). Every write now
-- stamps the row with the writing transaction's ID (pg_current_xact_id: any role may call it, so the kits'
-- roles need no new grant), and the reaper re-reads only rows stamped at or after the oldest transaction
-- still running at its previous read (pg_snapshot_xmin): a write that committed after that read, however
-- late, has such an ID. The index keeps that read to the rows it returns. NULL: written before this
-- migration, read by the reaper's full reading at each invocation's start.
ALTER TABLE :SCHEMA:.executors ADD COLUMN changed_xid xid8;
CREATE FUNCTION :SCHEMA:.executors_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.changed_xid := pg_current_xact_id();
  RETURN NEW;
END
$$;
CREATE TRIGGER executors_stamp_change BEFORE INSERT OR UPDATE ON :SCHEMA:.executors
  FOR EACH ROW EXECUTE FUNCTION :SCHEMA:.executors_stamp_change();
CREATE INDEX executors_changed_xid ON :SCHEMA:.executors (application_name, changed_xid);
