-- The worker queue (`baton submit` / `baton worker`): a queued run is one that workers should
-- drive until it finishes, fails or pauses for a reason other than being stopped. A worker claims
-- the oldest queued run whose lease is free or expired (SELECT ... FOR UPDATE SKIP LOCKED).
ALTER TABLE runs ADD COLUMN queued BOOLEAN NOT NULL DEFAULT false;

CREATE INDEX runs_queue ON runs (created_at, id) WHERE queued;
