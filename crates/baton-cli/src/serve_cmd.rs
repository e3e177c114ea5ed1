//! `baton serve`: the JSON API, `/metrics` and the dashboard over the store the global
//! `--workspace` / `--store` flags select.

use std::net::{IpAddr, SocketAddr};
use std::path::Path;

use anyhow::anyhow;
use clap::Args;

use crate::commands::workspace_dir;
use crate::store::open_existing_store;
use crate::{CliError, exit};

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on. Anything but a loopback address needs --token.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on (0: any free port; the URL printed says which).
    #[arg(long, value_name = "N", default_value_t = baton_serve::DEFAULT_PORT, value_parser = crate::flag_values::whole::<u16>)]
    port: u16,
    /// Access token every request must carry (`Authorization: Bearer TOKEN`, or `?token=`
    /// once in a browser).
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BATON_SERVE_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
}

pub async fn serve(workspace: &Path, store: Option<&str>, args: ServeArgs) -> Result<u8, CliError> {
    let token = args.token.filter(|t| !t.is_empty());
    if !baton_serve::is_loopback(args.bind) && token.is_none() {
        return Err(CliError::usage(anyhow!(
            "binding to {} exposes your runs beyond this machine: give an access token with \
             --token TOKEN (or BATON_SERVE_TOKEN), or bind to 127.0.0.1",
            args.bind
        )));
    }
    let workspace = workspace_dir(workspace)?;
    let opened = open_existing_store(&workspace, store).await?;
    let address = SocketAddr::new(args.bind, args.port);
    let listener = match tokio::net::TcpListener::bind(address).await {
        Ok(listener) => listener,
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            return Err(CliError::usage(anyhow!(
                "cannot listen on {address}: the port is in use (another `baton serve`?); \
                 choose another with --port N"
            )));
        }
        Err(e) => return Err(CliError::usage(anyhow!("cannot listen on {address}: {e}"))),
    };
    let local = listener.local_addr()?;
    let host = match local.ip() {
        IpAddr::V6(ip) => format!("[{ip}]"),
        IpAddr::V4(ip) => ip.to_string(),
    };
    let url = format!("http://{host}:{}/", local.port());
    // The URL line is the interface scripts (and the tests) read: printed once, flushed.
    match &token {
        Some(_) => println!(
            "baton serve: dashboard at {url}?token=TOKEN (API: Authorization: Bearer TOKEN), metrics at {url}metrics"
        ),
        None => println!("baton serve: dashboard at {url}, metrics at {url}metrics"),
    }
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let options = baton_serve::ServeOptions {
        token,
        ..Default::default()
    };
    baton_serve::serve(
        listener,
        opened.store.clone(),
        options,
        baton::signals::interrupted(),
    )
    .await
    .map_err(|e| anyhow!("the server stopped: {e}"))?;
    opened.store.close().await;
    Ok(exit::FINISHED)
}
