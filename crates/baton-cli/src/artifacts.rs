//! Workspace snapshots for workers (`--artifacts URL`): tar archives of a run's workspace in a
//! directory every worker can reach (a local path or `file://` URL; on several machines, a shared
//! mount). One archive per snapshot, named by the journal position it was taken at, so the
//! newest is simply the largest name; each is written to a temporary name and renamed, so a
//! worker killed mid-upload never leaves a half archive under a real name.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use baton_core::RunId;

/// Where `baton`'s own state lives in a workspace: never part of a snapshot (each worker's copy
/// would otherwise carry another machine's journal files around).
const STATE_DIR: &str = ".baton";

#[derive(Clone, Debug)]
pub struct Artifacts {
    root: PathBuf,
}

impl Artifacts {
    /// `URL` is `file:///dir` or a plain directory path; it is created if missing.
    pub fn open(url: &str) -> anyhow::Result<Artifacts> {
        let root = match url.split_once("://") {
            Some(("file", path)) => PathBuf::from(path),
            Some((scheme, _)) => {
                return Err(anyhow!(
                    "unsupported --artifacts {url}: only file:// URLs and directory paths are \
                     supported (not {scheme}://); put the directory on storage all workers share"
                ));
            }
            None => PathBuf::from(url),
        };
        std::fs::create_dir_all(&root)
            .with_context(|| format!("creating the artifact directory {}", root.display()))?;
        Ok(Artifacts { root })
    }

    fn run_dir(&self, run_id: &RunId) -> PathBuf {
        self.root.join(run_id.as_str())
    }

    /// Archives `workspace` as the snapshot of `run_id` after journal event `seq`.
    pub fn save(&self, run_id: &RunId, seq: u64, workspace: &Path) -> anyhow::Result<PathBuf> {
        let dir = self.run_dir(run_id);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let name = format!("workspace-{seq:012}.tar");
        let final_path = dir.join(&name);
        // Unique per process and snapshot: two workers never write the same temporary file.
        let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
        let result = (|| -> anyhow::Result<()> {
            let file = File::create(&tmp)?;
            let mut builder = tar::Builder::new(BufWriter::new(file));
            builder.follow_symlinks(false);
            append_dir(&mut builder, workspace, Path::new(""))?;
            let file = builder
                .into_inner()?
                .into_inner()
                .map_err(|e| e.into_error())?;
            // The rename must not publish an archive whose bytes are still in flight.
            file.sync_all()?;
            std::fs::rename(&tmp, &final_path)?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp);
            return Err(e.context(format!(
                "saving a snapshot of {} to {}",
                workspace.display(),
                final_path.display()
            )));
        }
        Ok(final_path)
    }

    /// The newest snapshot of `run_id`, if any.
    pub fn latest(&self, run_id: &RunId) -> anyhow::Result<Option<PathBuf>> {
        let dir = self.run_dir(run_id);
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e).with_context(|| format!("listing {}", dir.display())),
        };
        let mut newest: Option<String> = None;
        for entry in entries {
            let name = entry?.file_name().to_string_lossy().into_owned();
            if name.starts_with("workspace-")
                && name.ends_with(".tar")
                && newest.as_ref().is_none_or(|n| name > *n)
            {
                newest = Some(name);
            }
        }
        Ok(newest.map(|n| dir.join(n)))
    }

    /// Replaces `workspace` with the contents of `snapshot`.
    pub fn restore(snapshot: &Path, workspace: &Path) -> anyhow::Result<()> {
        if workspace.exists() {
            std::fs::remove_dir_all(workspace)
                .with_context(|| format!("clearing {}", workspace.display()))?;
        }
        std::fs::create_dir_all(workspace)
            .with_context(|| format!("creating {}", workspace.display()))?;
        let file =
            File::open(snapshot).with_context(|| format!("opening {}", snapshot.display()))?;
        tar::Archive::new(std::io::BufReader::new(file))
            .unpack(workspace)
            .with_context(|| {
                format!(
                    "unpacking {} into {}",
                    snapshot.display(),
                    workspace.display()
                )
            })
    }
}

/// Adds `dir`'s contents (not `.baton/`) under `prefix`, in name order so that equal
/// workspaces give equal archives.
fn append_dir<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if prefix.as_os_str().is_empty() && name == STATE_DIR {
            continue;
        }
        let path = entry.path();
        let inner = prefix.join(&name);
        let kind = entry.file_type()?;
        if kind.is_dir() {
            builder.append_dir(&inner, &path)?;
            append_dir(builder, &path, &inner)?;
        } else {
            // Files and symlinks (kept as links: follow_symlinks is off).
            builder.append_path_with_name(&path, &inner)?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_latest_snapshot_restores_the_workspace_without_baton_state() {
        let store = tempfile::tempdir().unwrap();
        let artifacts = Artifacts::open(&format!("file://{}", store.path().display())).unwrap();
        let run = RunId::new();
        assert!(artifacts.latest(&run).unwrap().is_none());
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "one").unwrap();
        std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
        std::fs::write(ws.path().join(".baton/baton.db"), "state").unwrap();
        artifacts.save(&run, 3, ws.path()).unwrap();
        std::fs::create_dir_all(ws.path().join("src")).unwrap();
        std::fs::write(ws.path().join("src/b.txt"), "two").unwrap();
        artifacts.save(&run, 12, ws.path()).unwrap();

        let latest = artifacts.latest(&run).unwrap().unwrap();
        assert!(latest.ends_with("workspace-000000000012.tar"), "{latest:?}");
        let copy = tempfile::tempdir().unwrap();
        std::fs::write(copy.path().join("stale.txt"), "old").unwrap();
        Artifacts::restore(&latest, copy.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(copy.path().join("a.txt")).unwrap(),
            "one"
        );
        assert_eq!(
            std::fs::read_to_string(copy.path().join("src/b.txt")).unwrap(),
            "two"
        );
        assert!(!copy.path().join("stale.txt").exists());
        assert!(!copy.path().join(".baton").exists());
        assert!(Artifacts::open("s3://bucket").is_err());
    }
}
