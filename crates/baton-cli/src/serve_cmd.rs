//! `baton serve`: the JSON API, `/metrics` and the dashboard over the store the global
//! `--workspace` / `--store` flags select; and the access token both HTTP servers (`serve`,
//! `mcp-server --port`) require on every bind, loopback included: other users of the machine
//! reach 127.0.0.1 too.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use anyhow::anyhow;
use clap::Args;

use crate::commands::workspace_dir;
use crate::store::open_existing_store;
use crate::{CliError, exit};

#[derive(Args)]
pub struct ServeArgs {
    /// Address to listen on (127.0.0.1: this machine only).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1")]
    bind: IpAddr,
    /// Port to listen on (0: any free port; the URL printed says which).
    #[arg(long, value_name = "N", default_value_t = baton_serve::DEFAULT_PORT, value_parser = crate::flag_values::whole::<u16>)]
    port: u16,
    /// Access token every request must carry (`Authorization: Bearer TOKEN`, or `?token=`
    /// once in a browser). Without it, the one in `serve.token` in baton's state directory,
    /// made (and printed) at the first start.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "BATON_SERVE_TOKEN",
        hide_env_values = true
    )]
    token: Option<String>,
    /// A host name requests may address the server by besides its address, `localhost`,
    /// `127.0.0.1` and `[::1]` (e.g. a reverse proxy's); every other `Host` is refused, as a
    /// possible DNS-rebinding attack. Repeatable.
    #[arg(long, value_name = "NAME")]
    allow_host: Vec<String>,
}

/// Where a server's token came from.
pub(crate) enum TokenSource {
    /// `--token` or its environment variable: never printed.
    Given,
    /// Made now, in this file: printed once, now.
    Made(PathBuf),
    /// Made by an earlier start, read from this file.
    Kept(PathBuf),
}

/// The token a server requires: `given` (a flag or environment variable), else the one in
/// `file_name` (`serve.token`, `mcp-server.token`) in baton's state directory, made there at
/// the first start from the system's CSPRNG. The file is the user's alone (0600, created
/// exclusively); one another user owns or could have read is refused, not used.
pub(crate) fn access_token(
    given: Option<String>,
    file_name: &str,
) -> Result<(String, TokenSource), CliError> {
    if let Some(token) = given.filter(|t| !t.trim().is_empty()) {
        return Ok((token, TokenSource::Given));
    }
    let dir = baton_state::base_dir().ok_or_else(|| {
        CliError::usage(anyhow!(
            "no state directory to keep the access token in (set HOME, XDG_STATE_HOME or \
             BATON_STATE_DIR), or give one with --token TOKEN"
        ))
    })?;
    let path = dir.join(file_name);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&dir)
        .map_err(|e| anyhow!("cannot create {}: {e}", dir.display()))?;
    if let Some(token) = make_token_file(&path)? {
        return Ok((token, TokenSource::Made(path)));
    }
    Ok((read_token_file(&path)?, TokenSource::Kept(path)))
}

/// Writes a new token to `path` unless it exists (then `None`). Written to a private temporary
/// file and hard-linked into place: the link fails if the name exists, so two starts at once
/// agree on one token and nobody reads a half-written file.
fn make_token_file(path: &Path) -> Result<Option<String>, CliError> {
    if path.symlink_metadata().is_ok() {
        return Ok(None);
    }
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| anyhow!("cannot read random bytes from /dev/urandom: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| {
            f.write_all(format!("{token}\n").as_bytes())?;
            f.sync_all()
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(anyhow!("cannot write {}: {e}", tmp.display()).into());
    }
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => Ok(Some(token)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(None),
        Err(e) => Err(anyhow!("cannot create {}: {e}", path.display()).into()),
    }
}

/// Reads a token file made earlier, refusing one that is not a plain file of this user's that
/// nobody else can read (a token others may have seen protects nothing).
fn read_token_file(path: &Path) -> Result<String, CliError> {
    use rustix::fs::{Mode, OFlags};
    let refused = |why: String| {
        CliError::usage(anyhow!(
            "{} {why}: refusing to use it as the access token. Remove it (a new one is made at \
             the next start) or give a token with --token TOKEN",
            path.display()
        ))
    };
    // No following a symbolic link planted in its place.
    let fd = rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| refused(format!("cannot be opened as a plain file ({e})")))?;
    let stat =
        rustix::fs::fstat(&fd).map_err(|e| anyhow!("cannot stat {}: {e}", path.display()))?;
    let me = rustix::process::geteuid().as_raw();
    if rustix::fs::FileType::from_raw_mode(stat.st_mode) != rustix::fs::FileType::RegularFile {
        return Err(refused("is not a plain file".into()));
    }
    if stat.st_uid != me {
        return Err(refused(format!(
            "belongs to uid {}, not to you (uid {me})",
            stat.st_uid
        )));
    }
    let mode = stat.st_mode & 0o777;
    if mode & 0o077 != 0 {
        return Err(refused(format!(
            "has mode {mode:04o}: other users may have read it (it must be 0600)"
        )));
    }
    let mut text = String::new();
    std::fs::File::from(fd)
        .read_to_string(&mut text)
        .map_err(|e| refused(format!("cannot be read as text ({e})")))?;
    let token = text.trim();
    if token.is_empty() || token.chars().any(char::is_whitespace) {
        return Err(refused("does not hold one token".into()));
    }
    Ok(token.to_owned())
}

/// Says on stderr, once at start, where the token is: the token itself only when it was just
/// made (and, for the dashboard, the URL to open once).
pub(crate) fn announce_token(server: &str, token: &str, source: &TokenSource, url: Option<&str>) {
    match source {
        TokenSource::Given => {}
        TokenSource::Made(path) => {
            eprintln!(
                "{server}: made an access token, shown this once (kept in {}, mode 0600): {token}",
                path.display()
            );
            if let Some(url) = url {
                eprintln!("{server}: open {url}?token={token} once; the browser keeps it");
            }
        }
        TokenSource::Kept(path) => eprintln!(
            "{server}: the access token is in {} (Authorization: Bearer TOKEN{})",
            path.display(),
            if url.is_some() {
                "; in a browser open the URL with ?token=TOKEN once"
            } else {
                ""
            }
        ),
    }
}

pub async fn serve(workspace: &Path, store: Option<&str>, args: ServeArgs) -> Result<u8, CliError> {
    let workspace = workspace_dir(workspace)?;
    let (token, source) = access_token(args.token, "serve.token")?;
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
    announce_token("baton serve", &token, &source, Some(&url));
    // The URL line is the interface scripts (and the tests) read: printed once, flushed; it
    // never holds the token (stdout may be a log).
    println!(
        "baton serve: dashboard at {url}?token=TOKEN (API: Authorization: Bearer TOKEN), metrics at {url}metrics"
    );
    let _ = std::io::stdout().flush();
    let options = baton_serve::ServeOptions {
        token: Some(token),
        allowed_hosts: args.allow_host,
        ..Default::default()
    };
    baton_serve::serve(
        listener,
        opened.store.clone(),
        options,
        baton_app::signals::interrupted(),
    )
    .await
    .map_err(|e| anyhow!("the server stopped: {e}"))?;
    opened.store.close().await;
    Ok(exit::FINISHED)
}
