//! Appending a batch of events: fenced, atomic, one transaction on the append connection
//! (see [`super::appender`] for why it has a connection and a thread of its own).

use baton_core::{EventRecord, RunStatus};
use jiff::Timestamp;

use super::SqliteStore;
use super::appender::{AppendFailure, Batch};
use crate::commit::{PreparedBatch, prepare_batch};
use crate::shared::{to_db_int, ts_to_text};
use crate::{Lease, StoreError};

impl SqliteStore {
    pub(super) async fn append_batch(
        &self,
        lease: &Lease,
        records: &[EventRecord],
    ) -> Result<(), StoreError> {
        let run_id = &lease.run_id;
        let Some(PreparedBatch {
            first,
            count,
            status,
            row,
        }) = prepare_batch(run_id, records)?
        else {
            return Ok(());
        };
        let batch = Batch {
            run_id: run_id.as_str().to_owned(),
            token: lease.token.clone(),
            first: to_db_int(first),
            count: to_db_int(count),
            status: status.map(RunStatus::as_str),
            updated_at: ts_to_text(Timestamp::now()),
            row,
        };
        match self.appender.append(batch).await {
            Ok(()) => Ok(()),
            Err(AppendFailure::Refused(cause)) => {
                let explained = self.shared().refusal(lease, first).await;
                Err(explained.unwrap_or_else(|| match cause {
                    Some(e) => self.sqlite_error("appending events", e),
                    // The fence matched no row, and no row explains it: the run is gone.
                    None => StoreError::NotFound {
                        run_id: run_id.clone(),
                    },
                }))
            }
            Err(AppendFailure::Failed(e)) => Err(self.sqlite_error("appending events", e)),
            Err(AppendFailure::Stopped) => {
                Err(self.db("appending events")(sqlx::Error::PoolClosed))
            }
        }
    }
}
