-- Runs and their journals.
--
-- Plain portable types only (TEXT, BIGINT) so that a Postgres backend can mirror this schema
-- column for column. Timestamps are RFC 3339 UTC strings with exactly nine fractional digits,
-- which sort lexicographically in time order.

CREATE TABLE runs (
    id               TEXT    NOT NULL PRIMARY KEY,
    goal             TEXT    NOT NULL,
    workspace        TEXT    NOT NULL,
    -- One of RunStatus::as_str(); follows the journal's status-changing events.
    status           TEXT    NOT NULL,
    created_at       TEXT    NOT NULL,
    updated_at       TEXT    NOT NULL,
    -- Number of journaled events, which is also the seq the next event must carry. Appends
    -- check it in the same statement that bumps it, which makes seq gap-free.
    event_count      BIGINT  NOT NULL DEFAULT 0,
    -- The lease: NULL token means nobody holds the run. Every append must present the token.
    lease_token      TEXT,
    lease_host       TEXT,
    lease_pid        BIGINT,
    -- Clock ticks after boot at which the holder started (Linux), against pid reuse.
    lease_pid_start  BIGINT,
    lease_expires_at TEXT
);

CREATE INDEX runs_by_creation ON runs (created_at, id);

-- A rowid table on purpose (not WITHOUT ROWID): payloads are often kilobytes of tool output,
-- and SQLite keeps WITHOUT ROWID rows inside the primary-key b-tree, which suits small rows only.
CREATE TABLE events (
    run_id  TEXT   NOT NULL REFERENCES runs (id),
    seq     BIGINT NOT NULL,
    -- Event::kind(), for queries that do not need the payload.
    kind    TEXT   NOT NULL,
    at      TEXT   NOT NULL,
    -- JSON of the baton_core::Event (tagged with "type").
    payload TEXT   NOT NULL,
    PRIMARY KEY (run_id, seq)
);
