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
        let (_, rx) = watch::channel(false);
        StopSignal(rx)
    }

    pub fn is_stopped(&self) -> bool {
        *self.0.borrow()
    }

    /// Runs `effect` unless a stop comes first; `None` means it was abandoned.
    /// An effect is not even started once a stop was asked for.
    pub(crate) async fn race<F: Future>(&self, effect: F) -> Option<F::Output> {
        if self.is_stopped() {
            return None;
        }
        let mut rx = self.0.clone();
        let stopped = async move {
            // A dropped handle can never ask for a stop: wait forever rather than report one.
            if rx.wait_for(|stopped| *stopped).await.is_err() {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            biased;
            out = effect => Some(out),
            _ = stopped => None,
        }
    }
}

impl StopHandle {
    pub fn stop(&self) {
        let _ = self.0.send(true);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_signal_without_a_handle_never_abandons_an_effect() {
        let never = StopSignal::never();
        assert_eq!(never.race(async { 7 }).await, Some(7));
        let (handle, signal) = StopSignal::new();
        drop(handle);
        assert_eq!(signal.race(async { 8 }).await, Some(8));
    }

    #[tokio::test]
    async fn a_stop_abandons_a_pending_effect_and_prevents_new_ones() {
        let (handle, signal) = StopSignal::new();
        let waiting = signal.clone();
        let task = tokio::spawn(async move { waiting.race(std::future::pending::<()>()).await });
        handle.stop();
        assert_eq!(task.await.ok(), Some(None));
        let started = std::sync::atomic::AtomicBool::new(false);
        let out = signal
            .race(async { started.store(true, std::sync::atomic::Ordering::SeqCst) })
            .await;
        assert_eq!(out, None);
        assert!(!started.load(std::sync::atomic::Ordering::SeqCst));
    }
}
