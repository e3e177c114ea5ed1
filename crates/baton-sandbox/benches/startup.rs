//! Per-command start-up cost of the sandbox: `true` spawned and waited for, bare and through
//! each backend. Prints p50 / p95 in milliseconds. `cargo bench -p baton-sandbox`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use baton_sandbox::{BackendChoice, Output, Sandbox, SandboxConfig};
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

const RUNS: usize = 200;

fn percentiles(mut samples: Vec<Duration>) -> (f64, f64) {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q) as usize].as_secs_f64() * 1e3;
    (at(0.50), at(0.95))
}

fn report(name: &str, samples: Vec<Duration>) {
    let (p50, p95) = percentiles(samples);
    println!("{name:<28} p50 {p50:>7.2} ms   p95 {p95:>7.2} ms   ({RUNS} runs)");
}

fn main() {
    let trampoline = Path::new(env!("CARGO_BIN_EXE_baton-sandbox-exec"));
    let ws = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let argv: Vec<OsString> = vec!["/bin/true".into()];

    let bare = (0..RUNS)
        .map(|_| {
            let start = Instant::now();
            let status = std::process::Command::new("/bin/true").status().unwrap();
            assert!(status.success());
            start.elapsed()
        })
        .collect();
    report("bare spawn", bare);

    let platform = baton_sandbox::detect(trampoline);
    for (name, backend, available) in [
        (
            "landlock+seccomp trampoline",
            BackendChoice::Landlock,
            platform.landlock != "none",
        ),
        (
            "bwrap+landlock+seccomp",
            BackendChoice::Bwrap,
            platform.bwrap.is_some(),
        ),
    ] {
        if !available {
            println!("{name:<28} unavailable on this machine");
            continue;
        }
        let config = SandboxConfig {
            backend,
            ..SandboxConfig::default()
        };
        let sandbox = Sandbox::new(config, trampoline).unwrap();
        let samples = (0..RUNS)
            .map(|_| {
                let start = Instant::now();
                let prepared = sandbox
                    .prepare(ws.path(), &argv, std::env::vars_os())
                    .unwrap();
                let done =
                    baton_sandbox::run(prepared, Duration::from_secs(60), Output::Capture(0))
                        .unwrap();
                assert_eq!(done.code(), 0);
                start.elapsed()
            })
            .collect();
        report(name, samples);
    }
}
