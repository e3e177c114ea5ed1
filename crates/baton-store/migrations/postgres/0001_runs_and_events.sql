-- Runs and their journals: the SQLite schema (migrations/sqlite/0001_runs_and_events.sql)
-- column for column, so that both backends read and write the same rows the same way.
--
-- Timestamps are RFC 3339 UTC strings with exactly nine fractional digits, which sort in time
-- order byte by byte; COLLATE "C" makes Postgres compare them (and ids) byte by byte too,
-- whatever the database's locale.

CREATE TABLE runs (
    id               TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    goal             TEXT    NOT NULL,
    workspace        TEXT    NOT NULL,
    -- One of RunStatus::as_str(); follows the journal's status-changing events.
    status           TEXT    NOT NULL,
    created_at       TEXT COLLATE "C" NOT NULL,
    updated_at       TEXT COLLATE "C" NOT NULL,
    -- Number of journaled events, which is also the seq the next event must carry. An append
    -- locks this row (SELECT ... FOR UPDATE), checks it and the lease token, inserts, and bumps
    -- it in one transaction, which makes seq gap-free.
    event_count      BIGINT  NOT NULL DEFAULT 0,
    -- The lease: NULL token means nobody holds the run. Every append must present the token.
    lease_token      TEXT,
    lease_host       TEXT,
    lease_pid        BIGINT,
    -- Clock ticks after boot at which the holder started (Linux), against pid reuse.
    lease_pid_start  BIGINT,
    -- In the database server's clock, so that holders on machines with skewed clocks agree.
    lease_expires_at TEXT COLLATE "C"
);

CREATE INDEX runs_by_creation ON runs (created_at, id);

CREATE TABLE events (
    run_id  TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
    seq     BIGINT NOT NULL,
    -- Event::kind(), for queries that do not need the payload.
    kind    TEXT   NOT NULL,
    at      TEXT   NOT NULL,
    -- JSON of the baton_core::Event (tagged with "type"), byte for byte as serialized.
    payload TEXT   NOT NULL,
    PRIMARY KEY (run_id, seq)
);
