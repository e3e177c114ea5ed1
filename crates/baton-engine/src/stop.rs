//! Clean stops: a signal (Ctrl-C, SIGTERM, `baton stop`) asks the run to pause. The effect in
//! progress (a model request, a tool) is abandoned — never a journal write, so the journal stays
//! consistent — and the run is recorded as paused; resume handles the abandoned call like any
//! other interrupted one.

use std::future::Future;

use tokio::sync::watch;

/// The receiving side, held by the engine.
#[derive(Clone, Debug)]
pub struct StopSignal(watch::Receiver<bool>);

/// The sending side, held by whoever decides to stop.
#[derive(Debug)]
pub struct StopHandle(watch::Sender<bool>);

impl StopSignal {
    pub fn new() -> (StopHandle, StopSignal) {
        let (tx, rx) = watch::channel(false);
        (StopHandle(tx), StopSignal(rx))
    }

    /// A signal that never fires (library use, tests).
    pub fn never() -> StopSignal {
        let (tx, rx) = watch::channel(false);
        // Keep the sender alive for the program's lifetime so `wait_for` never sees it closed.
        std::mem::forget(tx);
        StopSignal(rx)
    }

    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    /// Runs `effect` unless a stop comes first; `None` means it was abandoned.
    pub(crate) async fn race<F: Future>(&self, effect: F) -> Option<F::Output> {
        let mut rx = self.0.clone();
        tokio::select! {
            biased;
            out = effect => Some(out),
            _ = rx.wait_for(|stopped| *stopped) => None,
        }
    }
}

impl StopHandle {
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}
