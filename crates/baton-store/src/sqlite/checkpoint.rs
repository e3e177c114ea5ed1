//! State checkpoints on SQLite: one row per run, replaced as the run goes on (see
//! `migrations/sqlite/0004_state_checkpoints.sql`).

use baton_core::RunId;

use super::SqliteStore;
use super::rows::from_db_int;
use crate::shared::to_db_int;
use crate::{Checkpoint, Lease, StoreError};

/// Written only while the lease is held (so only by the run's one writer, whose state is the
/// latest), replacing the run's previous checkpoint; one statement, so
/// one commit. (The SELECT's WHERE is what lets SQLite parse the upsert.)
const SAVE: &str = "INSERT INTO checkpoints (run_id, seq, format, state) \
     SELECT id, ?, ?, ? FROM runs WHERE id = ? AND lease_token = ? \
     ON CONFLICT (run_id) DO UPDATE SET seq = excluded.seq, format = excluded.format, \
     state = excluded.state";

impl SqliteStore {
    pub(super) async fn save_checkpoint_row(
        &self,
        lease: &Lease,
        checkpoint: &Checkpoint,
    ) -> Result<(), StoreError> {
        sqlx::query(SAVE)
            .bind(to_db_int(checkpoint.seq))
            .bind(&checkpoint.format)
            .bind(&checkpoint.state)
            .bind(lease.run_id.as_str())
            .bind(&lease.token)
            .execute(&self.pool)
            .await
            .map_err(self.db("saving a state checkpoint"))?;
        Ok(())
    }

    pub(super) async fn load_checkpoint_row(
        &self,
        run_id: &RunId,
    ) -> Result<Option<Checkpoint>, StoreError> {
        let row: Option<(i64, String, String)> =
            sqlx::query_as("SELECT seq, format, state FROM checkpoints WHERE run_id = ?")
                .bind(run_id.as_str())
                .fetch_optional(&self.pool)
                .await
                .map_err(self.db("reading a state checkpoint"))?;
        row.map(|(seq, format, state)| {
            Ok(Checkpoint {
                seq: from_db_int(&self.path, "checkpoint seq", seq)?,
                format,
                state,
            })
        })
        .transpose()
    }
}
