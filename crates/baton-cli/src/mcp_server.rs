//! `baton mcp-server`: [`baton_app::mcp_runner`]'s tools, answered by this binary, served on stdio or
//! streamable HTTP.

use anyhow::anyhow;
use std::net::{IpAddr, SocketAddr};

use baton_app::mcp_runner::Callers;

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
    /// With --port: a host name (or `name:port`) requests may address the server by besides
    /// `localhost`, `127.0.0.1`, `[::1]` and the bound address with its port; every other
    /// `Host` is refused, as a possible DNS-rebinding attack. Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
}

/// The `Host` values the HTTP server answers: its own names with its port, and `allowed`. A bind
/// to every address without `allowed` takes any (the token guards it: rmcp cannot be told "any
/// IP address", and the machine's names are not known here).
fn hosts(bound: SocketAddr, allowed: Vec<String>) -> baton_mcp::Hosts {
    if bound.ip().is_unspecified() && allowed.is_empty() {
        return baton_mcp::Hosts::Any;
    }
    let port = bound.port();
    let mut names: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|name| format!("{name}:{port}"))
        .collect();
    if !bound.ip().is_unspecified() {
        // `SocketAddr` writes an IPv6 address in brackets, as `Host` does.
        names.push(bound.to_string());
    }
    names.extend(allowed);
    baton_mcp::Hosts::Only(names)
}

/// Serves the tools on stdio until the client goes away, or on HTTP until SIGINT/SIGTERM.
pub async fn serve(store: Option<&str>, args: McpServerArgs) -> Result<u8, CliError> {
    let exe =
        std::env::current_exe().map_err(|e| anyhow!("cannot find baton's own binary: {e}"))?;
    let store = store.map(str::to_owned);
    let Some(port) = args.port else {
        // The parent process is the user (their agent): any workspace it names.
        let service = baton_app::mcp_runner::service(exe, store, Callers::Parent);
        baton_mcp::serve_stdio(service)
            .await
            .map_err(|e| anyhow!("{e}"))?;
        return Ok(exit::FINISHED);
    };
    // Every bind needs the token, loopback included: other users of the machine reach
    // 127.0.0.1 too, and a run started here runs as this user, with this user's API key.
    let (token, source) = crate::serve_cmd::access_token(args.token, "mcp-server.token")?;
    let address = SocketAddr::new(args.bind, port);
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|e| CliError::usage(anyhow!("cannot listen on {address}: {e}")))?;
    let local = listener.local_addr()?;
    let hosts = hosts(local, args.allow_host);
    crate::serve_cmd::announce_token("baton mcp-server", &token, &source, None);
    eprintln!(
        "baton mcp-server: streamable HTTP at http://{local}/mcp (Authorization: Bearer TOKEN)"
    );
    // A caller holding the token may still only act in workspaces this user trusted.
    let service = baton_app::mcp_runner::service(exe, store, Callers::TokenHolders);
    // Runs it started are supervised processes of their own: stopping the server stops none.
    baton_mcp::serve_http(
        service,
        listener,
        Some(token),
        hosts,
        baton_app::signals::interrupted(),
    )
    .await
    .map_err(|e| anyhow!("{e}"))?;
    Ok(exit::FINISHED)
}
