//! `baton mcp-server`: [`baton::mcp_runner`]'s tools, answered by this binary, served on stdio or
//! streamable HTTP.

use anyhow::anyhow;
use std::net::{IpAddr, SocketAddr};

use baton::mcp_runner::Callers;

use crate::{CliError, exit};

#[derive(clap::Args)]
pub struct McpServerArgs {
    /// Serve streamable HTTP at http://ADDR:PORT/mcp instead of stdio (0: any free port; the
    /// URL printed on stderr says which).
    #[arg(long, value_name = "N", value_parser = crate::flag_values::whole::<u16>)]
    port: Option<u16>,
    /// With --port: the address to listen on (127.0.0.1: this machine only).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// With --port: the token every request must carry (`Authorization: Bearer TOKEN`).
    /// Without it, the one in `mcp-server.token` in baton's state directory, made (and
    /// printed) at the first start.
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
    let store = store.map(str::to_owned);
    let Some(port) = args.port else {
        // The parent process is the user (their agent): any workspace it names.
        let service = baton::mcp_runner::service(exe, store, Callers::Parent);
        baton_mcp::serve_stdio(service)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        return Ok(exit::FINISHED);
    };
    // Every bind needs the token, loopback included: other users of the machine reach
    // 127.0.0.1 too, and a run started here runs as this user, with this user's API key.
    let (token, source) = crate::serve_cmd::access_token(args.token, "mcp-server.token")?;
    // rmcp's Host check takes loopback names only; beyond loopback the token alone guards.
    let hosts = if baton_serve::is_loopback(args.bind) {
        baton_mcp::Hosts::LoopbackOnly
    } else {
        baton_mcp::Hosts::Any
    };
    let address = SocketAddr::new(args.bind, port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| CliError::usage(anyhow!("cannot listen on {address}: {e}")))?;
    let local = listener.local_addr()?;
    crate::serve_cmd::announce_token("baton mcp-server", &token, &source, None);
    eprintln!(
        "baton mcp-server: streamable HTTP at http://{local}/mcp (Authorization: Bearer TOKEN)"
    );
    // A caller holding the token may still only act in workspaces this user trusted.
    let service = baton::mcp_runner::service(exe, store, Callers::TokenHolders);
    // Runs it started are supervised processes of their own: stopping the server stops none.
    baton_mcp::serve_http(
        service,
        listener,
        Some(token),
        hosts,
        baton::signals::interrupted(),
    )
    .await
    .map_err(|e| anyhow!("{e}"))?;
    Ok(exit::FINISHED)
}
