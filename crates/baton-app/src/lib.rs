//! The baton application's services over the library (`baton`): what the `baton` CLI does
//! beyond building and driving runs, kept out of the library so that a program embedding baton
//! gets the runtime without them. Supervision and background runs (`supervisor`), `baton
//! doctor`'s checks (`doctor`), a run's goal from an argument, stdin or a file (`goal`), plan
//! files (`plans`), `baton mcp` and the `--mcp` flags (`mcp`), one command
//! under the sandbox for `baton sandbox` (`sandbox`), snapshots as a person uses them (`snapshots`), the MCP server's tools
//! answered by running baton once (`mcp_runner`), and first-signal-pauses handling (`signals`).
#![warn(missing_docs)]

pub mod doctor;
pub mod goal;
pub mod mcp;
pub mod mcp_runner;
pub mod plans;
pub mod sandbox;
pub mod signals;
pub mod snapshots;
pub mod supervisor;
