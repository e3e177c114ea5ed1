-- The worker queue column, kept identical to PostgreSQL's (migrations/postgres/0002_run_queue.sql)
-- so both backends have the same columns; only the PostgreSQL store claims queued runs.
ALTER TABLE runs ADD COLUMN queued INTEGER NOT NULL DEFAULT 0;
