-- Who holds a lease, as an operator names it (`baton worker --worker-id`), and when the lease
-- was last taken or renewed (its age in `baton ls --all` / `baton status`; in the server's
-- clock, like the expiry). The same columns as migrations/sqlite/0003_lease_worker.sql. Both are
-- NULL while nobody holds the run, and for a lease taken by a baton older than this migration.
ALTER TABLE runs ADD COLUMN lease_worker TEXT;
ALTER TABLE runs ADD COLUMN lease_renewed_at TEXT COLLATE "C";
