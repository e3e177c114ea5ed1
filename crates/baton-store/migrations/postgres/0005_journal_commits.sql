-- The journal as its commits, one row each (issue 20: store bytes per turn ≤ 2× the turn's
-- content; baton-store/src/commit.rs says why and what `body` holds). An append is one batch of
-- events made durable together, and is now one row: a row per event repeated the run id, kind
-- and time in every row and in the primary-key index, and the batch's events repeat each other
-- (a tool call's intent holds the arguments its model reply holds), which one compressed body
-- per commit stores once. Kept identical to SQLite's migrations/sqlite/0005_journal_commits.sql.
--
-- `encoding`: 0 = `body` is the commit's events as JSON text, [{"at": …, "event": …}, …];
-- 1 = the same, compressed as one zstd frame (what appends write).
CREATE TABLE journal (
    run_id    TEXT COLLATE "C" NOT NULL REFERENCES runs (id),
    -- The seq of the commit's first event; the others follow it without a gap.
    first_seq BIGINT NOT NULL,
    encoding  BIGINT NOT NULL,
    body      BYTEA  NOT NULL,
    PRIMARY KEY (run_id, first_seq)
);

-- Every event written before becomes a commit of its own, byte for byte: the stored payload is
-- pasted into the JSON text, not parsed again (which could rewrite its numbers).
INSERT INTO journal (run_id, first_seq, encoding, body)
SELECT run_id, seq, 0, convert_to('[{"at":"' || at || '","event":' || payload || '}]', 'UTF8')
FROM events;

DROP TABLE events;

-- State checkpoints are stored compressed too (their format gets "+zstd"; baton-store/src/commit.rs):
-- a run's state is kilobytes to megabytes of JSON, rewritten every thousand events. The table is
-- a cache, never the truth, so it is made anew rather than converted: each run's next resume
-- replays its journal once and saves a checkpoint again.
DROP TABLE checkpoints;
CREATE TABLE checkpoints (
    run_id TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES runs (id),
    seq    BIGINT NOT NULL,
    format TEXT   NOT NULL,
    state  BYTEA NOT NULL
);
