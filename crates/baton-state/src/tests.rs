use super::*;
use std::fs;

fn dirs() -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("state");
    let ws = dir.path().join("proj");
    fs::create_dir_all(&ws).unwrap();
    let ws = ws.canonicalize().unwrap();
    (dir, base, ws)
}

#[test]
fn each_workspace_has_its_own_directory_outside_it() {
    let (dir, base, ws) = dirs();
    let other = dir.path().join("elsewhere/proj");
    fs::create_dir_all(&other).unwrap();
    let a = StateDir::under(Some(&base), &ws);
    let b = StateDir::under(Some(&other), &other);
    let c = StateDir::under(Some(&base), &other);
    assert!(a.root().starts_with(base.join("workspaces")), "{a:?}");
    let name = a.root().file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("proj-") && name.len() == "proj-".len() + 16,
        "{name}"
    );
    assert_ne!(a.root(), c.root(), "same name, other path");
    assert_ne!(b.root(), c.root());
    assert_eq!(a, StateDir::under(Some(&base), &ws), "stable");
    assert!(!a.is_inside_workspace());
    assert_eq!(a.journal(), a.root().join("baton.db"));
    assert_eq!(a.inputs_dir(), ws.join(".baton"));
}

#[test]
fn without_a_base_the_state_stays_in_the_workspace_and_says_so() {
    let (_dir, _base, ws) = dirs();
    let state = StateDir::under(None, &ws);
    assert_eq!(state.root(), ws.join(".baton"));
    assert!(state.is_inside_workspace());
    assert_eq!(state.prepare().unwrap(), Migration::default());
}

#[test]
fn a_worktree_shares_its_parents_state_directory_in_both_layouts() {
    let (_dir, base, ws) = dirs();
    let state = StateDir::under(Some(&base), &ws);
    state.prepare().unwrap();
    let child = state.worktree("child-1");
    fs::create_dir_all(&child).unwrap();
    assert!(is_worktree(&child));
    assert_eq!(StateDir::under(Some(&base), &child).root(), state.root());
    assert!(!is_worktree(&ws));

    let old = ws.join(".baton/worktrees/child-2");
    fs::create_dir_all(&old).unwrap();
    assert!(is_worktree(&old));
    // A directory merely called `worktrees` is not one.
    let plain = ws.join("worktrees/x");
    fs::create_dir_all(&plain).unwrap();
    assert!(!is_worktree(&plain));
}

#[test]
fn prepare_moves_the_old_layout_once_and_keeps_the_users_inputs() {
    let (_dir, base, ws) = dirs();
    let old = ws.join(".baton");
    fs::create_dir_all(old.join("shadow.git/objects")).unwrap();
    fs::create_dir_all(old.join("logs")).unwrap();
    fs::write(old.join("baton.db"), "db").unwrap();
    fs::write(old.join("baton.db-wal"), "wal").unwrap();
    fs::write(old.join("shadow.git/objects/ab"), "obj").unwrap();
    fs::write(old.join("logs/r.log"), "log").unwrap();
    fs::write(old.join("config.toml"), "model = \"m\"\n").unwrap();
    let state = StateDir::under(Some(&base), &ws);

    let migration = state.prepare().unwrap();
    assert_eq!(
        migration.moved,
        ["baton.db-wal", "baton.db", "shadow.git", "logs"]
    );
    assert_eq!(migration.from.as_deref(), Some(old.as_path()));
    assert_eq!(fs::read_to_string(state.journal()).unwrap(), "db");
    assert_eq!(
        fs::read_to_string(state.root().join("baton.db-wal")).unwrap(),
        "wal"
    );
    assert_eq!(
        fs::read_to_string(state.shadow_git().join("objects/ab")).unwrap(),
        "obj"
    );
    assert!(!old.join("baton.db").exists() && !old.join("shadow.git").exists());
    assert!(old.join("config.toml").is_file(), "inputs stay");
    let marker = fs::read_to_string(state.root().join(MARKER)).unwrap();
    assert_eq!(marker.trim_end(), ws.display().to_string());
    use std::os::unix::fs::PermissionsExt;
    let mode = fs::metadata(state.root()).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);

    assert_eq!(state.prepare().unwrap(), Migration::default(), "idempotent");
}

#[test]
fn prepare_leaves_what_the_new_place_already_has() {
    let (_dir, base, ws) = dirs();
    let state = StateDir::under(Some(&base), &ws);
    state.prepare().unwrap();
    fs::write(state.journal(), "new").unwrap();
    fs::create_dir_all(ws.join(".baton")).unwrap();
    fs::write(ws.join(".baton/baton.db"), "old").unwrap();
    // The old layout's worktree pointer is not state.
    fs::write(ws.join(".baton/shadow.git"), "gitdir: /x\n").unwrap();

    let migration = state.prepare().unwrap();
    assert_eq!(migration.left, ["baton.db"]);
    assert!(migration.moved.is_empty());
    assert_eq!(fs::read_to_string(state.journal()).unwrap(), "new");
    assert_eq!(
        fs::read_to_string(ws.join(".baton/baton.db")).unwrap(),
        "old"
    );
    assert!(!state.shadow_git().exists());
}

#[test]
fn a_copy_across_file_systems_keeps_trees_and_symlinks() {
    let dir = tempfile::tempdir().unwrap();
    let from = dir.path().join("from");
    fs::create_dir_all(from.join("a/b")).unwrap();
    fs::write(from.join("a/b/f"), "x").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", from.join("link")).unwrap();
    let to = dir.path().join("to");

    migrate::copy_then_remove(&from, &to).unwrap();
    assert!(!from.exists());
    assert_eq!(fs::read_to_string(to.join("a/b/f")).unwrap(), "x");
    assert_eq!(
        fs::read_link(to.join("link")).unwrap(),
        Path::new("/etc/passwd")
    );
    let leftovers: Vec<_> = fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(leftovers, ["to"]);
}

#[test]
fn many_threads_preparing_at_once_all_succeed() {
    for _ in 0..20 {
        let (_dir, base, ws) = dirs();
        let state = StateDir::under(Some(&base), &ws);
        let handles: Vec<_> = (0..8)
            .map(|_| {
                let state = state.clone();
                std::thread::spawn(move || state.prepare().map(|_| ()))
            })
            .collect();
        for h in handles {
            h.join().unwrap().unwrap();
        }
        let marker = fs::read_to_string(state.root().join(MARKER)).unwrap();
        assert_eq!(marker.trim_end(), ws.display().to_string());
        let debris: Vec<_> = fs::read_dir(state.root())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n.to_string_lossy().starts_with('.'))
            .collect();
        assert!(debris.is_empty(), "{debris:?}");
    }
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    fs::symlink_metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn prepare_makes_a_readable_state_directory_private() {
    use std::os::unix::fs::PermissionsExt;
    let (_dir, base, ws) = dirs();
    let state = StateDir::under(Some(&base), &ws);
    // As an earlier version left it: directories 0755, the journal and a log 0644.
    fs::create_dir_all(state.logs()).unwrap();
    fs::create_dir_all(state.supervisors()).unwrap();
    for file in [
        state.journal(),
        state.root().join("baton.db-wal"),
        state.logs().join("r.log"),
    ] {
        fs::write(&file, "x").unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o644)).unwrap();
    }
    for dir in [
        base.join("workspaces"),
        state.root().to_path_buf(),
        state.logs(),
        state.supervisors(),
    ] {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
    }

    state.prepare().unwrap();
    for dir in [
        base.join("workspaces"),
        state.root().to_path_buf(),
        state.logs(),
        state.supervisors(),
    ] {
        assert_eq!(mode_of(&dir), 0o700, "{}", dir.display());
    }
    for file in [
        state.journal(),
        state.root().join("baton.db-wal"),
        state.logs().join("r.log"),
    ] {
        assert_eq!(mode_of(&file), 0o600, "{}", file.display());
    }

    // A new file is private from the start; a symlink is left alone (not followed).
    let fresh = state.root().join("fresh.db");
    make_private_file(&fresh).unwrap();
    assert_eq!(mode_of(&fresh), 0o600);
    let outside = base.parent().unwrap().join("outside.txt");
    fs::write(&outside, "x").unwrap();
    fs::set_permissions(&outside, fs::Permissions::from_mode(0o644)).unwrap();
    std::os::unix::fs::symlink(&outside, state.logs().join("link.log")).unwrap();
    state.prepare().unwrap();
    assert_eq!(mode_of(&outside), 0o644);
}

#[test]
fn a_planted_symlink_in_the_old_layout_is_neither_moved_nor_followed() {
    let (dir, base, ws) = dirs();
    // What a command planted: `.baton/supervisors` naming a directory of its choosing (a pidfile
    // that makes `baton stop` signal a pid it picked), and a log directory holding a symlink.
    let elsewhere = dir.path().join("elsewhere");
    fs::create_dir_all(&elsewhere).unwrap();
    fs::write(elsewhere.join("r.pid"), "1 1 host\n").unwrap();
    let old = ws.join(".baton");
    fs::create_dir_all(old.join("logs")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, old.join("supervisors")).unwrap();
    std::os::unix::fs::symlink(elsewhere.join("r.pid"), old.join("logs/r.log")).unwrap();
    fs::write(old.join("baton.db"), "db").unwrap();
    let state = StateDir::under(Some(&base), &ws);

    let migration = state.prepare().unwrap();
    assert_eq!(migration.moved, ["baton.db"]);
    assert_eq!(migration.refused, ["logs", "supervisors"]);
    assert!(!state.supervisors().exists() && !state.logs().exists());
    assert!(
        fs::symlink_metadata(old.join("supervisors"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(
        fs::read_to_string(elsewhere.join("r.pid")).unwrap(),
        "1 1 host\n"
    );
    assert_eq!(fs::read_dir(&elsewhere).unwrap().count(), 1);
}
