-- The latest replayed state of a run, so that a resume folds only the events after it instead
-- of the whole journal (issue 20: 10,000 turns resumed in 290 ms before). A cache, never the
-- truth: `state` is the JSON of baton_core::RunState after events 0..seq, in the layout named by
-- `format`; a reader that does not know the format, or finds anything wrong with it, replays
-- the journal instead. One row per run, replaced as the run goes on. Kept identical to
-- SQLite's migrations/sqlite/0004_state_checkpoints.sql.
CREATE TABLE checkpoints (
    run_id TEXT COLLATE "C" NOT NULL PRIMARY KEY REFERENCES runs (id),
    seq    BIGINT NOT NULL,
    format TEXT   NOT NULL,
    state  TEXT   NOT NULL
);
