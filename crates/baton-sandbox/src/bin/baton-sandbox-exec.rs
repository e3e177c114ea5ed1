//! The trampoline as a stand-alone binary, for this crate's tests and benchmark (baton itself
//! dispatches `baton __sandbox-exec` to the same entry point).

use std::process::ExitCode;

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1);
    match args.next() {
        Some(sub) if sub == baton_sandbox::trampoline::SUBCOMMAND => {
            baton_sandbox::trampoline::main(args.collect())
        }
        _ => {
            eprintln!(
                "usage: baton-sandbox-exec {} --spec JSON -- COMMAND [ARGS…]",
                baton_sandbox::trampoline::SUBCOMMAND
            );
            ExitCode::from(2)
        }
    }
}
