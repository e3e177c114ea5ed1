//! `baton mcp-server`: [`baton::mcp_runner`]'s tools, answered by this binary, served on stdio or
//! streamable HTTP.

use anyhow::anyhow;
use std::net::{IpAddr, SocketAddr};

use crate::{CliError, exit};

#[derive(clap::Args)]
pub struct McpServerArgs {
    /// Serve streamable HTTP at http://ADDR:PORT/mcp instead of stdio (0: any free port; the
    /// URL printed on stderr says which).
    #[arg(long, value_name = "N", value_parser = crate::flag_values::whole::<u16>)]
    port: Option<u16>,
    /// With --port: the address to listen on. Anything but a loopback address needs --token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// With --port: the token every request must carry (`Authorization: Bearer TOKEN`).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BATON_MCP_SERVER_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

/// Serves the tools on stdio until the client goes away, or on HTTP until SIGINT/SIGTERM.
pub async fn serve(store: Option<&str>, args: McpServerArgs) -> Result<u8, CliError> {
    let exe =
        std::env::current_exe().map_err(|e| anyhow!("cannot find baton's own binary: {e}"))?;
    let service = baton::mcp_runner::service(exe, store.map(str::to_owned));
    let Some(port) = args.port else {
        baton_mcp::serve_stdio(service)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        return Ok(exit::FINISHED);
    };
    let token = args.token.filter(|t| !t.is_empty());
    let hosts = if baton_serve::is_loopback(args.bind) {
        baton_mcp::Hosts::LoopbackOnly
    } else {
        baton_mcp::Hosts::Any
    };
    if hosts == baton_mcp::Hosts::Any && token.is_none() {
        return Err(CliError::usage(anyhow!(
            "binding to {} lets anyone who can reach this machine start runs: give a token with \
             --token TOKEN (or BATON_MCP_SERVER_TOKEN), or bind to 127.0.0.1",
            args.bind
        )));
    }
    let address = SocketAddr::new(args.bind, port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| CliError::usage(anyhow!("cannot listen on {address}: {e}")))?;
    let local = listener.local_addr()?;
    eprintln!(
        "baton mcp-server: streamable HTTP at http://{local}/mcp{}",
        if token.is_some() {
            " (Authorization: Bearer TOKEN)"
        } else {
            ""
        }
    );
    // Runs it started are supervised processes of their own: stopping the server stops none.
    baton_mcp::serve_http(
        service,
        listener,
        token,
        hosts,
        baton::signals::interrupted(),
    )
    .await
    .map_err(|e| anyhow!("{e}"))?;
    Ok(exit::FINISHED)
}
