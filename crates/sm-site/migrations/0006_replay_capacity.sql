-- The capacity answer on a replayed trace (methodology §13.5: the largest time scale that meets
-- the SLO), so the runs list shows it without reading each run's record. The answer as run.json
-- writes it (`phases.replay.capacity`, JSON); '' for a run without one, as every run stored before
-- this migration is (no site before it kept a replay section).
ALTER TABLE runs ADD COLUMN replay_capacity TEXT NOT NULL DEFAULT '';
