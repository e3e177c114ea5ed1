//! Workspace snapshots for workers (`--artifacts URL`): tar archives of a run's workspace in an
//! object store every worker can reach — a directory (a path or `file://` URL; on several
//! machines, a shared mount) or an S3-compatible bucket (`s3://BUCKET[/PREFIX]`, configured from
//! the standard `AWS_*` environment). Both go through `object_store`, one interface.
//!
//! One archive per snapshot, `RUN/workspace-SEQ.tar`, named by the journal position it was taken
//! at, so the newest is simply the largest name. An upload is atomic for readers: S3 publishes an
//! object (or a completed multipart upload) whole; in a directory `object_store` writes a staging
//! file (`NAME#N`, never listed) and renames it, fsyncing file and directory first. An archive is
//! built in a temporary file and streamed from there (multipart past 10 MiB), and downloaded to
//! one before unpacking, so it is never held in memory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use baton_core::RunId;
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::buffered::BufWriter;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{ObjectStore, ObjectStoreExt};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Where `baton`'s own state lives in a workspace: never part of a snapshot (each worker's copy
/// would otherwise carry another machine's journal files around).
const STATE_DIR: &str = ".baton";

/// Environment variables whose values must never appear in a message (object_store's errors
/// are not known to contain them; this makes sure).
const SECRET_VARS: &[&str] = &[
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_TOKEN",
    "AWS_ACCESS_KEY_ID",
];

/// An artifact store that could not be opened, read or written; the text names the location
/// and the object, with credentials scrubbed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ArtifactError(String);

/// What an `--artifacts` value names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArtifactLocation {
    /// A directory (on several machines, a shared mount).
    Directory(PathBuf),
    /// An S3-compatible bucket, objects under `prefix`.
    S3 {
        /// The bucket's name.
        bucket: String,
        /// The key prefix inside it (no leading or trailing `/`).
        prefix: String,
    },
}

impl ArtifactLocation {
    /// Parses `--artifacts`: a directory path, `file://DIR`, or `s3://BUCKET[/PREFIX]`.
    pub fn parse(url: &str) -> Result<ArtifactLocation, String> {
        const USAGE: &str = "use a directory path, file:///DIR or s3://BUCKET[/PREFIX]";
        match url.split_once("://") {
            None if url.trim().is_empty() => Err(format!("--artifacts is empty: {USAGE}")),
            None => Ok(ArtifactLocation::Directory(PathBuf::from(url))),
            Some(("file", path)) if !path.is_empty() => {
                Ok(ArtifactLocation::Directory(PathBuf::from(path)))
            }
            Some(("s3", rest)) => {
                let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
                if bucket.contains('@') || bucket.contains(':') {
                    // Not echoed: it may hold a key.
                    return Err(
                        "--artifacts: credentials do not belong in the s3:// URL; set \
                                AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY instead"
                            .into(),
                    );
                }
                if bucket.is_empty() {
                    return Err(format!("--artifacts {url}: no bucket named; {USAGE}"));
                }
                Ok(ArtifactLocation::S3 {
                    bucket: bucket.to_owned(),
                    prefix: prefix.trim_matches('/').to_owned(),
                })
            }
            Some((scheme, _)) => Err(format!(
                "unsupported --artifacts {}: {scheme}:// is not a supported store; {USAGE}",
                redact(url, &secret_values())
            )),
        }
    }
}

/// The artifact store of a pool of workers: where each run's workspace snapshots are kept.
#[derive(Clone, Debug)]
pub struct Artifacts {
    store: Arc<dyn ObjectStore>,
    /// The location as given, for messages (it holds no credentials: see `parse`).
    url: String,
    /// Credential values to scrub from every message.
    secrets: Vec<String>,
}

impl Artifacts {
    /// Opens `--artifacts URL` (see [`ArtifactLocation::parse`]); a directory is created if
    /// missing. Bad URLs and configuration are usage errors.
    pub fn open(url: &str) -> Result<Artifacts, ArtifactError> {
        let secrets = secret_values();
        let location = ArtifactLocation::parse(url).map_err(ArtifactError)?;
        let store: Arc<dyn ObjectStore> = match &location {
            ArtifactLocation::Directory(root) => {
                std::fs::create_dir_all(root).map_err(|e| {
                    ArtifactError(format!(
                        "creating the artifact directory {}: {e}",
                        root.display()
                    ))
                })?;
                // fsync: a snapshot that was published must survive a power loss whole, as the
                // run's next step (journaled right after) depends on it.
                let local = LocalFileSystem::new_with_prefix(root)
                    .map_err(|e| {
                        ArtifactError(format!(
                            "opening the artifact directory {}: {e}",
                            root.display()
                        ))
                    })?
                    .with_fsync(true);
                Arc::new(local)
            }
            ArtifactLocation::S3 { bucket, prefix } => {
                // Endpoint, keys, region and AWS_ALLOW_HTTP come from the environment.
                let s3 = AmazonS3Builder::from_env()
                    .with_bucket_name(bucket)
                    .build()
                    .map_err(|e| {
                        ArtifactError(redact(
                            &format!(
                                "--artifacts {url}: {e} (set AWS_ENDPOINT_URL, AWS_REGION, \
                                 AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY; AWS_ALLOW_HTTP=true \
                                 for a plain-http endpoint)"
                            ),
                            &secrets,
                        ))
                    })?;
                if prefix.is_empty() {
                    Arc::new(s3)
                } else {
                    Arc::new(PrefixStore::new(s3, prefix.as_str()))
                }
            }
        };
        Ok(Artifacts {
            store,
            url: url.to_owned(),
            secrets,
        })
    }

    /// An error about `what`, with any credential value scrubbed.
    fn fail(&self, what: String, e: impl std::fmt::Display) -> ArtifactError {
        ArtifactError(redact(&format!("{what}: {e:#}"), &self.secrets))
    }

    fn key(run_id: &RunId, seq: u64) -> ObjectPath {
        ObjectPath::from(format!("{}/workspace-{seq:012}.tar", run_id.as_str()))
    }

    /// Archives `workspace` as the snapshot of `run_id` after journal event `seq`; returns the
    /// object's name.
    pub async fn save(
        &self,
        run_id: &RunId,
        seq: u64,
        workspace: &Path,
    ) -> Result<String, ArtifactError> {
        let key = Self::key(run_id, seq);
        let what = format!(
            "saving a snapshot of {} to {} ({key})",
            workspace.display(),
            self.url
        );
        let tmp = tempfile::NamedTempFile::new().map_err(|e| self.fail(what.clone(), e))?;
        let file = tmp.reopen().map_err(|e| self.fail(what.clone(), e))?;
        let source = workspace.to_owned();
        tokio::task::spawn_blocking(move || write_archive(&source, file))
            .await
            .map_err(|e| self.fail(what.clone(), e))?
            .map_err(|e| self.fail(what.clone(), e))?;
        let mut reader = tokio::fs::File::open(tmp.path())
            .await
            .map_err(|e| self.fail(what.clone(), e))?;
        let mut writer = BufWriter::new(self.store.clone(), key.clone());
        let written = async {
            let mut buf = vec![0u8; 1 << 20];
            loop {
                let n = reader.read(&mut buf).await?;
                if n == 0 {
                    return Ok::<_, std::io::Error>(());
                }
                writer.write_all(&buf[..n]).await?;
            }
        }
        .await;
        if let Err(e) = written {
            // A half multipart upload is never visible; abort frees its parts.
            let _ = writer.abort().await;
            return Err(self.fail(what, e));
        }
        // Completes the put or the multipart upload: only now is the object visible. (No abort
        // after a failed shutdown: the writer has given its upload up by then.)
        writer.shutdown().await.map_err(|e| self.fail(what, e))?;
        Ok(key.to_string())
    }

    /// The name of the newest snapshot of `run_id`, if any.
    pub async fn latest(&self, run_id: &RunId) -> Result<Option<String>, ArtifactError> {
        let dir = ObjectPath::from(run_id.as_str());
        let mut listing = self.store.list(Some(&dir));
        let mut newest: Option<ObjectPath> = None;
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|e| {
                self.fail(
                    format!("listing the snapshots of run {run_id} in {}", self.url),
                    e,
                )
            })?;
            let Some(name) = meta.location.filename() else {
                continue;
            };
            if is_snapshot_name(name)
                && newest
                    .as_ref()
                    .and_then(|n| n.filename())
                    .is_none_or(|n| name > n)
            {
                newest = Some(meta.location.clone());
            }
        }
        Ok(newest.map(|p| p.to_string()))
    }

    /// Replaces `workspace` with the contents of the snapshot named `key`.
    pub async fn restore(&self, key: &str, workspace: &Path) -> Result<(), ArtifactError> {
        let what = format!(
            "restoring {key} from {} into {}",
            self.url,
            workspace.display()
        );
        let tmp = tempfile::NamedTempFile::new().map_err(|e| self.fail(what.clone(), e))?;
        let mut file = tokio::fs::File::create(tmp.path())
            .await
            .map_err(|e| self.fail(what.clone(), e))?;
        let got = self
            .store
            .get(&ObjectPath::from(key))
            .await
            .map_err(|e| self.fail(what.clone(), e))?;
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| self.fail(what.clone(), e))?;
            file.write_all(&chunk)
                .await
                .map_err(|e| self.fail(what.clone(), e))?;
        }
        file.flush().await.map_err(|e| self.fail(what.clone(), e))?;
        drop(file);
        let target = workspace.to_owned();
        tokio::task::spawn_blocking(move || unpack(tmp.path(), &target))
            .await
            .map_err(|e| self.fail(what.clone(), e))?
            .map_err(|e| self.fail(what, e))
    }
}

fn is_snapshot_name(name: &str) -> bool {
    name.starts_with("workspace-") && name.ends_with(".tar")
}

/// The values of the credential variables that are set (long enough to be worth scrubbing).
fn secret_values() -> Vec<String> {
    SECRET_VARS
        .iter()
        .filter_map(|var| std::env::var(var).ok())
        .filter(|v| v.len() >= 4)
        .collect()
}

/// `text` with every secret value replaced by `***`.
fn redact(text: &str, secrets: &[String]) -> String {
    secrets.iter().fold(text.to_owned(), |acc, secret| {
        acc.replace(secret.as_str(), "***")
    })
}

/// Writes the tar archive of `workspace` (not `.baton/`) to `file` and syncs it.
fn write_archive(workspace: &Path, file: std::fs::File) -> std::io::Result<()> {
    let mut builder = tar::Builder::new(std::io::BufWriter::new(file));
    builder.follow_symlinks(false);
    append_dir(&mut builder, workspace, Path::new(""))?;
    let file = builder
        .into_inner()?
        .into_inner()
        .map_err(|e| e.into_error())?;
    file.sync_all()?;
    Ok(())
}

fn unpack(archive: &Path, workspace: &Path) -> std::io::Result<()> {
    let context =
        |what: String| move |e: std::io::Error| std::io::Error::other(format!("{what}: {e}"));
    if workspace.exists() {
        std::fs::remove_dir_all(workspace)
            .map_err(context(format!("clearing {}", workspace.display())))?;
    }
    std::fs::create_dir_all(workspace)
        .map_err(context(format!("creating {}", workspace.display())))?;
    let file = std::fs::File::open(archive)?;
    tar::Archive::new(std::io::BufReader::new(file))
        .unpack(workspace)
        .map_err(context("unpacking the archive".into()))
}

/// Adds `dir`'s contents (not `.baton/`) under `prefix`, in name order so that equal
/// workspaces give equal archives.
fn append_dir<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    dir: &Path,
    prefix: &Path,
) -> std::io::Result<()> {
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
    fn artifact_urls_parse_and_bad_ones_say_what_is_accepted() {
        assert_eq!(
            ArtifactLocation::parse("/mnt/shared").unwrap(),
            ArtifactLocation::Directory("/mnt/shared".into())
        );
        assert_eq!(
            ArtifactLocation::parse("file:///mnt/shared").unwrap(),
            ArtifactLocation::Directory("/mnt/shared".into())
        );
        assert_eq!(
            ArtifactLocation::parse("s3://bucket").unwrap(),
            ArtifactLocation::S3 {
                bucket: "bucket".into(),
                prefix: String::new()
            }
        );
        assert_eq!(
            ArtifactLocation::parse("s3://bucket/team/a/").unwrap(),
            ArtifactLocation::S3 {
                bucket: "bucket".into(),
                prefix: "team/a".into()
            }
        );
        let err = ArtifactLocation::parse("gs://bucket").unwrap_err();
        assert!(
            err.contains("gs://") && err.contains("s3://BUCKET"),
            "{err}"
        );
        assert!(ArtifactLocation::parse("s3://").is_err());
        assert!(ArtifactLocation::parse("").is_err());
        let err = ArtifactLocation::parse("s3://AKIA:hunter2secret@bucket/x").unwrap_err();
        assert!(!err.contains("hunter2secret"), "{err}");
    }

    #[test]
    fn redaction_replaces_every_secret_value() {
        let secrets = vec!["s3cr3t-key".to_owned(), "AKIAEXAMPLE".to_owned()];
        let text = redact(
            "request to http://x failed: signature for AKIAEXAMPLE with s3cr3t-key (s3cr3t-key)",
            &secrets,
        );
        assert_eq!(
            text,
            "request to http://x failed: signature for *** with *** (***)"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn the_latest_snapshot_restores_the_workspace_without_baton_state() {
        let store = tempfile::tempdir().unwrap();
        let artifacts = Artifacts::open(&format!("file://{}", store.path().display())).unwrap();
        let run = RunId::new();
        assert!(artifacts.latest(&run).await.unwrap().is_none());
        let ws = tempfile::tempdir().unwrap();
        std::fs::write(ws.path().join("a.txt"), "one").unwrap();
        std::fs::create_dir_all(ws.path().join(".baton")).unwrap();
        std::fs::write(ws.path().join(".baton/baton.db"), "state").unwrap();
        artifacts.save(&run, 3, ws.path()).await.unwrap();
        std::fs::create_dir_all(ws.path().join("src")).unwrap();
        std::fs::write(ws.path().join("src/b.txt"), "two").unwrap();
        artifacts.save(&run, 12, ws.path()).await.unwrap();
        // The on-disk layout other tools (and older workers) rely on, no staging files left.
        let dir = store.path().join(run.as_str());
        let mut names: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["workspace-000000000003.tar", "workspace-000000000012.tar"]
        );
        // A staging file of an upload in progress is never taken for a snapshot.
        std::fs::write(dir.join("workspace-000000000099.tar#1"), "half").unwrap();

        let latest = artifacts.latest(&run).await.unwrap().unwrap();
        assert!(latest.ends_with("workspace-000000000012.tar"), "{latest:?}");
        let copy = tempfile::tempdir().unwrap();
        std::fs::write(copy.path().join("stale.txt"), "old").unwrap();
        artifacts.restore(&latest, copy.path()).await.unwrap();
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
        assert!(Artifacts::open("ftp://host/dir").is_err());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn an_archive_larger_than_one_part_round_trips() {
        // Past BufWriter's 10 MiB buffer the upload is multipart (staged, then renamed here).
        let store = tempfile::tempdir().unwrap();
        let artifacts = Artifacts::open(&store.path().display().to_string()).unwrap();
        let run = RunId::new();
        let ws = tempfile::tempdir().unwrap();
        let big: Vec<u8> = (0..12 * 1024 * 1024u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(ws.path().join("big.bin"), &big).unwrap();
        let key = artifacts.save(&run, 1, ws.path()).await.unwrap();
        let copy = tempfile::tempdir().unwrap();
        artifacts.restore(&key, copy.path()).await.unwrap();
        assert!(std::fs::read(copy.path().join("big.bin")).unwrap() == big);
    }
}
