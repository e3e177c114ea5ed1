//! SIGINT and SIGTERM for a program that runs agents: the first one pauses the runs cleanly
//! (each journals its pause and exits 3), a second one quits at once (exit 130) — or, for a
//! server, either one ends it.
//!
//! ```no_run
//! # async fn demo() -> baton::Result<()> {
//! let runtime = baton::Runtime::builder()
//!     .workspace("/path/to/repo")
//!     .stop_signal(baton_app::signals::stop_on_signals("pausing the run (again to quit)"))
//!     .build()
//!     .await?;
//! runtime.start("add a --verbose flag").await?;
//! # Ok(())
//! # }
//! ```

use baton_engine::{StopHandle, StopSignal};

/// A stop signal that the first SIGINT / SIGTERM fires, saying `first` on stderr; a second one
/// exits the process at once (130). Give it to [`baton::RuntimeBuilder::stop_signal`].
pub fn stop_on_signals(first: &'static str) -> StopSignal {
    let (handle, signal) = StopSignal::new();
    on_signals(handle, first);
    signal
}

/// First SIGINT / SIGTERM: say `first` and stop `handle` (the runs pause cleanly). Second: quit
/// at once (exit 130). Needs a Tokio runtime.
pub fn on_signals(handle: StopHandle, first: &'static str) {
    tokio::spawn(async move {
        let Ok(mut term) =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        else {
            return;
        };
        for round in 0.. {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            if round == 0 {
                eprintln!("{first}");
                handle.stop();
            } else {
                std::process::exit(130);
            }
        }
    });
}

/// Resolves at the first SIGINT or SIGTERM: a server's shutdown future.
pub async fn interrupted() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
