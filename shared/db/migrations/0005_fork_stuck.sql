-- cancel-and-fork: the reaper forks a stuck workflow it cancelled; the ledger records it as 'stuck'.
ALTER TABLE :SCHEMA:.forks DROP CONSTRAINT forks_reason_check;
ALTER TABLE :SCHEMA:.forks ADD CONSTRAINT forks_reason_check
  CHECK (reason IN ('diverged', 'child-diverged', 'orphaned-version', 'stuck'));
