//! Making a commit of a tree in the shadow repository: what a snapshot and a merge of a
//! parallel task's worktree both end with.

use crate::error::{Result, SnapshotError};
use crate::{ShadowRepo, SnapshotId};

impl ShadowRepo {
    /// `git commit-tree` of `tree` on `parents` with `message`, dated `at` (the caller's clock,
    /// so a snapshot's id follows from its content and time alone): the new commit.
    pub(crate) fn commit_tree(
        &self,
        tree: &str,
        parents: &[&str],
        message: &str,
        at: jiff::Timestamp,
    ) -> Result<SnapshotId> {
        let mut args = vec!["commit-tree", tree];
        for parent in parents {
            args.extend(["-p", parent]);
        }
        args.extend(["-F", "-"]);
        let id = self
            .git
            .call(&args)
            .date(at)
            .stdin(message.as_bytes())
            .text()?;
        SnapshotId::parse(&id).map_err(|_| SnapshotError::Unexpected {
            command: "commit-tree".into(),
            detail: format!("not a commit id: {id:?}"),
        })
    }
}
