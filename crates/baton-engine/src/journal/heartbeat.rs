//! The lease, renewed in the background while a run is driven.

use std::sync::Arc;
use std::time::Duration;

use baton_core::RunId;
use baton_store::{Lease, Store, StoreError};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Renews the lease in the background so that a long tool call does not let it expire.
pub(super) struct Heartbeat {
    run_id: RunId,
    task: JoinHandle<()>,
    lost: watch::Receiver<bool>,
}

impl Heartbeat {
    pub(super) fn start(store: Arc<dyn Store>, lease: Lease) -> Heartbeat {
        let run_id = lease.run_id.clone();
        let (tx, rx) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut lease = lease;
            loop {
                let ttl = u64::try_from(
                    lease
                        .expires_at
                        .duration_since(jiff::Timestamp::now())
                        .as_millis(),
                )
                .unwrap_or(0);
                // Renew at a third of the remaining time; never spin faster than every 200 ms.
                tokio::time::sleep(Duration::from_millis((ttl / 3).max(200))).await;
                match store.renew(&lease).await {
                    Ok(renewed) => {
                        tracing::debug!(run = lease.run_id.as_str(), "lease renewed");
                        lease = renewed
                    }
                    Err(StoreError::LeaseLost { .. }) => {
                        let _ = tx.send(true);
                        return;
                    }
                    Err(e) => tracing::warn!("lease renewal failed (will retry): {e}"),
                }
            }
        });
        Heartbeat {
            run_id,
            task,
            lost: rx,
        }
    }

    pub(super) fn lost(&self) -> Option<StoreError> {
        (*self.lost.borrow()).then(|| StoreError::LeaseLost {
            run_id: self.run_id.clone(),
        })
    }

    pub(super) fn stop(self) {
        self.task.abort();
    }
}

impl Drop for Heartbeat {
    /// A cancelled engine future must not keep renewing the lease of a run it no longer drives.
    fn drop(&mut self) {
        self.task.abort();
    }
}
