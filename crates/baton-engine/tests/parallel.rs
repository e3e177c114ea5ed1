#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `--parallel` in the engine, on both stores: child runs in worktrees of the shadow
//! repository, their journals next to the parent's, their verified work merged back, a failed
//! child failing its task and skipping its dependents, and the children's usage counted in the
//! parent's.

#[allow(dead_code)]
mod support;

use std::sync::Arc;

use baton_core::task::{Plan, TaskSpec};
use baton_core::*;
use baton_engine::{Engine, Extensions, RunOutcome, Snapshots, StartRun};
use baton_model::ModelError;
use serde_json::json;
use support::backend::{Backend, on_both_backends};
use support::fn_provider::{FnProvider, call, prompt_text};
use support::run::{Collect, engine_with, settings};

on_both_backends!(
    independent_tasks_are_worked_on_by_child_runs_and_merged,
    a_failed_child_fails_its_task_and_skips_its_dependents,
    a_child_cut_short_at_its_start_is_started_on_resume,
    a_worktree_that_cannot_be_made_pauses_the_run_until_fixed,
    a_resumed_parent_hands_its_raised_limits_to_its_children,
);

fn task(id: &str, deps: &[&str], check: &str) -> TaskSpec {
    TaskSpec {
        id: id.into(),
        title: format!("make {id}"),
        instructions: format!("Write {id}.txt"),
        deps: deps.iter().map(|d| d.to_string()).collect(),
        check: check.into(),
        risky: false,
    }
}

/// The task a request works on, from its brief.
fn task_of(request: &ModelRequest) -> String {
    let text = prompt_text(request);
    let marker = "Your current task is `";
    text.find(marker)
        .map(|i| {
            text[i + marker.len()..]
                .chars()
                .take_while(|c| *c != '`')
                .collect()
        })
        .unwrap_or_default()
}

/// An engine with workspace snapshots on: parallel tasks need them for their worktrees.
fn snapshotting(
    store: Arc<dyn baton_store::Store>,
    provider: Arc<FnProvider>,
) -> (Engine, Arc<Collect>) {
    let extensions = Extensions {
        snapshots: Snapshots::On,
        ..Extensions::default()
    };
    engine_with(
        store,
        provider,
        baton_tools::ToolRegistry::standard(),
        extensions,
    )
}

/// Writes `ID.txt` (with `content(ID)`) in one turn, then finishes.
fn writer(content: fn(&str) -> String) -> FnProvider {
    FnProvider::new(move |request, _| -> Result<ModelReply, ModelError> {
        let id = task_of(request);
        let done = request
            .messages
            .iter()
            .any(|m| matches!(m, Message::Tool { name, .. } if name == "write_file"));
        if done {
            call("finish", json!({"summary": format!("wrote {id}.txt")}), 50)
        } else {
            call(
                "write_file",
                json!({"path": format!("{id}.txt"), "content": content(&id)}),
                50,
            )
        }
    })
}

type Started = (
    RunOutcome,
    Vec<EventRecord>,
    Arc<dyn baton_store::Store>,
    Option<baton_store::testing::PgTestSchema>,
);

async fn start(
    backend: Backend,
    ws: &std::path::Path,
    provider: FnProvider,
    tasks: Vec<TaskSpec>,
) -> Started {
    start_with(backend, ws, provider, tasks, |_| {}).await
}

async fn start_with(
    backend: Backend,
    ws: &std::path::Path,
    provider: FnProvider,
    tasks: Vec<TaskSpec>,
    edit: impl FnOnce(&mut RunSettings),
) -> Started {
    let (store, schema) = backend.store(ws).await;
    let (engine, observer) = snapshotting(store.clone(), Arc::new(provider));
    let mut settings = settings(ContextSettings::default());
    settings.tasks.parallel = 3;
    settings.tasks.fix_attempts = 1;
    settings.tasks.approaches = 1;
    edit(&mut settings);
    let outcome = engine
        .start(StartRun {
            goal: "write the files".into(),
            workspace: ws.into(),
            settings,
            plan: Some(Plan {
                tasks,
                final_check: None,
            }),
        })
        .await
        .unwrap();
    let events = observer.events();
    (outcome, events, store, schema)
}

async fn independent_tasks_are_worked_on_by_child_runs_and_merged(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("README"), "hi\n").unwrap();
    let tasks = vec![
        task("t1", &[], "grep -q t1 t1.txt"),
        task("t2", &[], "grep -q t2 t2.txt"),
        task("t3", &[], "grep -q t3 t3.txt"),
        task(
            "t4",
            &["t1", "t2", "t3"],
            "test -f t1.txt && test -f t2.txt && test -f t4.txt",
        ),
    ];
    let (outcome, events, store, _schema) =
        start(backend, ws.path(), writer(|id| format!("{id}\n")), tasks).await;
    assert!(
        matches!(outcome, RunOutcome::Finished { .. }),
        "{outcome:?}"
    );
    for id in ["t1", "t2", "t3", "t4"] {
        assert_eq!(
            std::fs::read_to_string(ws.path().join(format!("{id}.txt"))).unwrap(),
            format!("{id}\n")
        );
    }
    let parent = outcome.run_id().clone();
    let parent_events: Vec<&EventRecord> = events.iter().filter(|r| r.run_id == parent).collect();
    let delegated: Vec<&str> = parent_events
        .iter()
        .filter_map(|r| match &r.event {
            Event::TaskDelegated { task, .. } => Some(task.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        delegated,
        ["t1", "t2", "t3"],
        "t4 ran alone, in the workspace"
    );
    // Every child is a finished run of its own in the same store.
    let runs = store.list_runs().await.unwrap();
    assert_eq!(runs.len(), 4);
    assert!(runs.iter().all(|r| r.status == RunStatus::Finished));
    // The parent's usage includes the children's: two calls (50 + 20 tokens) per task.
    let state = replay(&store.load_events(&parent).await.unwrap()).unwrap();
    assert_eq!(state.usage.prompt_tokens, 4 * 2 * 50);
    assert_eq!(state.usage.completion_tokens, 4 * 2 * 20);
    assert_eq!(
        state
            .board
            .unwrap()
            .count(baton_core::board::TaskStatus::Verified),
        4
    );
}

async fn a_failed_child_fails_its_task_and_skips_its_dependents(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let tasks = vec![
        task("t1", &[], "grep -q t1 t1.txt"),
        // Its check can never pass.
        task("t2", &[], "grep -q never t2.txt"),
        task("t3", &["t2"], "true"),
        task("t4", &[], "grep -q t4 t4.txt"),
    ];
    let (outcome, events, _store, _schema) =
        start(backend, ws.path(), writer(|id| format!("{id}\n")), tasks).await;
    let RunOutcome::Failed { error, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert!(error.contains("t2 [failed]"), "{error}");
    assert!(error.contains("t3 [skipped]"), "{error}");
    assert!(ws.path().join("t1.txt").exists() && ws.path().join("t4.txt").exists());
    assert!(
        !ws.path().join("t2.txt").exists(),
        "a failed task's work is not merged"
    );
    let returned_failed = events.iter().any(|r| {
        matches!(&r.event, Event::TaskReturned { task, result: DelegatedResult::Failed { .. }, .. } if task == "t2")
    });
    assert!(returned_failed);
    // The failed task's worktree stays for a person to look at; the merged ones are gone.
    let worktrees = baton_state::StateDir::for_workspace(ws.path())
        .root()
        .join("worktrees");
    let left: Vec<String> = std::fs::read_dir(worktrees)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let failed_child = events
        .iter()
        .find_map(|r| match &r.event {
            Event::TaskDelegated {
                task, child_run, ..
            } if task == "t2" => Some(child_run.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(left, [failed_child]);
}

/// A parent journal that delegated `t1` to child run `child` and then died, with the child's
/// run in the store as the crash left it: `child_events` are its journal so far.
async fn crashed_parent(
    store: &Arc<dyn baton_store::Store>,
    ws: &std::path::Path,
    child_events: Vec<Event>,
) -> (RunId, RunId) {
    use baton_store::{Holder, NewRun};
    let (parent, child) = (RunId::new(), RunId::new());
    std::fs::write(ws.join("README"), "the workspace\n").unwrap();
    let repo = baton_snapshot::ShadowRepo::open(ws).unwrap();
    let base = repo
        .snapshot(parent.as_str(), "wave_start", jiff::Timestamp::now())
        .unwrap()
        .id;
    let mut parent_settings = settings(ContextSettings::default());
    parent_settings.tasks.parallel = 2;
    let mut child_settings = parent_settings.clone();
    child_settings.tasks.parallel = 1;
    let started = |settings: RunSettings, workspace: &std::path::Path| Event::RunStarted {
        goal: "write the files".into(),
        workspace: workspace.display().to_string(),
        system_prompt: "sys".into(),
        project_instructions: None,
        tools: vec![],
        settings,
    };
    let journal = |run: &RunId, events: Vec<Event>| -> Vec<EventRecord> {
        events
            .into_iter()
            .enumerate()
            .map(|(seq, event)| EventRecord {
                run_id: run.clone(),
                seq: seq as u64,
                at: jiff::Timestamp::now(),
                event,
            })
            .collect()
    };
    let new_run = |id: &RunId, workspace: &std::path::Path| NewRun {
        id: id.clone(),
        goal: "write the files".into(),
        workspace: workspace.display().to_string(),
    };
    let holder = Holder::this_process();
    let lease = store
        .create_run(&new_run(&parent, ws), &holder)
        .await
        .unwrap();
    let events = vec![
        started(parent_settings, ws),
        Event::PlanSet {
            source: task::PlanSource::User,
            tasks: vec![
                task("t1", &[], "grep -q t1 t1.txt"),
                task("t2", &[], "grep -q t2 t2.txt"),
            ],
            final_check: None,
        },
        Event::SnapshotTaken {
            snapshot: base.to_string(),
            reason: task::SnapshotReason::WaveStart,
            task: None,
        },
        Event::TaskDelegated {
            task: "t1".into(),
            child_run: child.to_string(),
            base_snapshot: base.to_string(),
        },
        Event::TaskDelegated {
            task: "t2".into(),
            child_run: RunId::new().to_string(),
            base_snapshot: base.to_string(),
        },
    ];
    store
        .append(&lease, &journal(&parent, events))
        .await
        .unwrap();
    store.release(&lease).await.unwrap();
    let worktree = repo.worktree_dir(child.as_str());
    // A child that journaled anything had its worktree made first.
    if !child_events.is_empty() {
        repo.create_worktree(&worktree, child.as_str(), &base)
            .unwrap();
    }
    let lease = store
        .create_run(&new_run(&child, &worktree), &holder)
        .await
        .unwrap();
    let child_events = child_events
        .into_iter()
        .map(|event| match event {
            Event::RunStarted { .. } => started(child_settings.clone(), &worktree),
            other => other,
        })
        .collect();
    store
        .append(&lease, &journal(&child, child_events))
        .await
        .unwrap();
    store.release(&lease).await.unwrap();
    (parent, child)
}

/// The parent died right after creating t1's child run (before the child journaled anything),
/// or between the child's `run_started` and its `plan_set`: resumed, the child is started (or
/// given its plan) and does its one task. A file a person added meanwhile survives the merges.
async fn a_child_cut_short_at_its_start_is_started_on_resume(backend: Backend) {
    let placeholder = Event::RunStarted {
        goal: String::new(),
        workspace: String::new(),
        system_prompt: String::new(),
        project_instructions: None,
        tools: vec![],
        settings: settings(ContextSettings::default()),
    };
    for child_events in [vec![], vec![placeholder]] {
        let ws = tempfile::tempdir().unwrap();
        let (store, _schema) = backend.store(ws.path()).await;
        let (parent, child) = crashed_parent(&store, ws.path(), child_events).await;
        // A person's file, made while the run was stopped: merges must keep it.
        std::fs::write(ws.path().join("notes.txt"), "mine\n").unwrap();
        let provider = writer(|id| format!("{id}\n"));
        let (engine, _observer) = snapshotting(store.clone(), Arc::new(provider));
        let outcome = engine.resume(&parent, &Default::default()).await.unwrap();
        assert!(
            matches!(outcome, RunOutcome::Finished { .. }),
            "{outcome:?}"
        );
        for id in ["t1", "t2"] {
            assert!(ws.path().join(format!("{id}.txt")).exists(), "{id}");
        }
        assert_eq!(
            std::fs::read_to_string(ws.path().join("notes.txt")).unwrap(),
            "mine\n"
        );
        assert!(ws.path().join("README").exists());
        let child_state = replay(&store.load_events(&child).await.unwrap()).unwrap();
        assert_eq!(child_state.status, RunStatus::Finished);
        let board = child_state.board.unwrap();
        assert_eq!(
            board.tasks.len(),
            1,
            "the child worked on its one task only"
        );
        assert_eq!(board.tasks[0].spec.id, "t1");
    }
}

/// The worktrees cannot be made (here: `worktrees` in the state directory is a file): the run
/// pauses with reason `workspace` instead of failing the tasks, and a resume after the fix
/// finishes.
async fn a_worktree_that_cannot_be_made_pauses_the_run_until_fixed(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let state = baton_state::StateDir::for_workspace(ws.path());
    state.prepare().unwrap();
    let in_the_way = state.root().join("worktrees");
    std::fs::write(&in_the_way, "in the way").unwrap();
    let tasks = vec![
        task("t1", &[], "grep -q t1 t1.txt"),
        task("t2", &[], "grep -q t2 t2.txt"),
    ];
    let (outcome, _events, store, _schema) =
        start(backend, ws.path(), writer(|id| format!("{id}\n")), tasks).await;
    let RunOutcome::Paused { reason, detail, .. } = &outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(*reason, PauseReason::Workspace);
    assert!(detail.contains("worktree"), "{detail}");

    std::fs::remove_file(&in_the_way).unwrap();
    resume_to_both_files(store, outcome.run_id(), &Default::default(), ws.path()).await;
}

/// Each child needs two turns (write, then finish) but may take one: the children pause at
/// their turn limit and so does the parent. Resumed with a higher limit, the parent hands it to
/// the children, which finish.
async fn a_resumed_parent_hands_its_raised_limits_to_its_children(backend: Backend) {
    let ws = tempfile::tempdir().unwrap();
    let tasks = vec![
        task("t1", &[], "grep -q t1 t1.txt"),
        task("t2", &[], "grep -q t2 t2.txt"),
    ];
    let (outcome, _events, store, _schema) = start_with(
        backend,
        ws.path(),
        writer(|id| format!("{id}\n")),
        tasks,
        |s| s.limits.max_turns = 1,
    )
    .await;
    assert!(matches!(outcome, RunOutcome::Paused { .. }), "{outcome:?}");
    assert!(!ws.path().join("t1.txt").exists(), "nothing is merged yet");

    let raised = baton_engine::SettingsOverride::edit(|s| s.limits.max_turns = 10);
    resume_to_both_files(store, outcome.run_id(), &raised, ws.path()).await;
}

/// Resumes the parent with `overrides`: it finishes, with both tasks' files merged.
async fn resume_to_both_files(
    store: Arc<dyn baton_store::Store>,
    run_id: &RunId,
    overrides: &baton_engine::SettingsOverride,
    ws: &std::path::Path,
) {
    let (engine, _observer) = snapshotting(store, Arc::new(writer(|id| format!("{id}\n"))));
    let resumed = engine.resume(run_id, overrides).await.unwrap();
    assert!(
        matches!(resumed, RunOutcome::Finished { .. }),
        "{resumed:?}"
    );
    assert!(ws.join("t1.txt").exists() && ws.join("t2.txt").exists());
}
