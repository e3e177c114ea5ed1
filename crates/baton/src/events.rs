//! Events as a stream: an observer that forwards every journaled event to a channel, for a
//! program that watches a run while it works.

use baton_core::{EventRecord, RunState};
use baton_engine::RunObserver;
use tokio::sync::mpsc;

/// A [`RunObserver`] that sends each journaled record to a channel (never blocks the run: the
/// channel is unbounded, and a dropped receiver is ignored).
pub struct EventChannel(mpsc::UnboundedSender<EventRecord>);

/// An observer to pass to [`crate::RuntimeBuilder::observer`] and the receiving end of its
/// events, in journal order.
///
/// ```no_run
/// # async fn demo() -> baton::Result<()> {
/// let (observer, mut events) = baton::events::channel();
/// let runtime = baton::Runtime::builder()
///     .workspace(".")
///     .observer(std::sync::Arc::new(observer))
///     .build()
///     .await?;
/// tokio::spawn(async move {
///     while let Some(record) = events.recv().await {
///         println!("#{} {}", record.seq, record.event.kind());
///     }
/// });
/// runtime.start("fix the failing test").await?;
/// # Ok(())
/// # }
/// ```
pub fn channel() -> (EventChannel, mpsc::UnboundedReceiver<EventRecord>) {
    let (sender, receiver) = mpsc::unbounded_channel();
    (EventChannel(sender), receiver)
}

impl RunObserver for EventChannel {
    fn on_event(&self, record: &EventRecord, _state: &RunState) {
        let _ = self.0.send(record.clone());
    }
}
