//! The task graph: a plan's tasks, its file format and its validation.
//!
//! A plan is a list of tasks with dependencies and an acceptance check each. It comes from the
//! user (`baton run --plan plan.toml`) or from the planner model call (`submit_plan`, the same
//! fields as JSON); either way it is validated here before it is journaled (`plan_set`), so a
//! journaled plan is always a DAG with known dependencies and a check per task.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// One task of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub id: String,
    pub title: String,
    pub instructions: String,
    /// Ids of the tasks that must be verified before this one starts.
    #[serde(default)]
    pub deps: Vec<String>,
    /// A shell command run in the workspace; exit code 0 means the task is done.
    pub check: String,
    /// Risky tasks get a workspace snapshot before each of their commands.
    #[serde(default, skip_serializing_if = "is_false")]
    pub risky: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// Where a plan came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlanSource {
    /// A plan file given by the user.
    User,
    /// The planner model call.
    Planner,
    /// Follow-up tasks baton added itself (after a failed final check or a merge conflict).
    Baton,
}

/// Why the workspace was snapshotted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SnapshotReason {
    /// Before the first task: the state the run started from.
    RunStart,
    /// After a turn whose tool calls could have changed files.
    AfterTools,
    /// After a task's check passed: the last known good state.
    TaskVerified,
    /// Before a command of a risky task.
    BeforeRisky,
    /// Before tasks are handed to parallel worktrees: the state they all start from.
    WaveStart,
    /// A parallel task's verified work merged into the workspace (a merge commit).
    TaskMerged,
    /// The workspace as it is before a parallel task's work merges into it.
    BeforeMerge,
}

/// A plan as written in a plan file (`[[task]]` tables) or submitted by the planner.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFile {
    /// A run-level check after all tasks (e.g. the whole test suite).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    #[serde(default, rename = "task", alias = "tasks")]
    pub tasks: Vec<PlanFileTask>,
}

/// A task as written by a person or a model: every field optional so that a missing one is
/// reported by name instead of as a generic parse error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanFileTask {
    pub id: Option<String>,
    pub title: Option<String>,
    pub instructions: Option<String>,
    #[serde(default)]
    pub deps: Vec<String>,
    pub check: Option<String>,
    #[serde(default)]
    pub risky: bool,
}

/// A valid plan: tasks in the order given, every dependency known, no cycle, a check each.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub tasks: Vec<TaskSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_check: Option<String>,
}

/// What is wrong with a plan, naming the task.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error("the plan cannot be read: {0}")]
    Syntax(String),
    #[error("the plan has no tasks")]
    Empty,
    #[error("task #{position} has no `id`")]
    MissingId { position: usize },
    #[error("task `{id}` has an invalid id: ids are 1-64 letters, digits, `-`, `_` or `.`")]
    InvalidId { id: String },
    #[error("task `{id}` has no `{field}`")]
    MissingField { id: String, field: &'static str },
    #[error("task id `{id}` is used twice (tasks #{first} and #{second})")]
    DuplicateId {
        id: String,
        first: usize,
        second: usize,
    },
    #[error("task `{id}` depends on `{dep}`, which is not a task of this plan")]
    UnknownDependency { id: String, dep: String },
    #[error("task `{id}` depends on itself")]
    SelfDependency { id: String },
    #[error("the dependencies form a cycle: {}", cycle.join(" -> "))]
    Cycle { cycle: Vec<String> },
    #[error("the plan's `check` is empty")]
    EmptyFinalCheck,
}

impl PlanFile {
    pub fn from_toml(text: &str) -> Result<PlanFile, PlanError> {
        toml::from_str(text).map_err(|e| PlanError::Syntax(e.to_string()))
    }

    pub fn from_json(text: &str) -> Result<PlanFile, PlanError> {
        serde_json::from_str(text).map_err(|e| PlanError::Syntax(e.to_string()))
    }

    /// Checks the plan and returns it in its journaled form.
    pub fn validate(self) -> Result<Plan, PlanError> {
        let final_check = match self.check {
            Some(check) if check.trim().is_empty() => return Err(PlanError::EmptyFinalCheck),
            other => other,
        };
        let tasks = self
            .tasks
            .into_iter()
            .enumerate()
            .map(|(index, task)| task.into_spec(index + 1))
            .collect::<Result<Vec<_>, _>>()?;
        validate_tasks(&tasks, &[])?;
        Ok(Plan { tasks, final_check })
    }

    pub fn from_plan(plan: &Plan) -> PlanFile {
        PlanFile {
            check: plan.final_check.clone(),
            tasks: plan
                .tasks
                .iter()
                .map(|t| PlanFileTask {
                    id: Some(t.id.clone()),
                    title: Some(t.title.clone()),
                    instructions: Some(t.instructions.clone()),
                    deps: t.deps.clone(),
                    check: Some(t.check.clone()),
                    risky: t.risky,
                })
                .collect(),
        }
    }

    pub fn to_toml(&self) -> String {
        // A struct of strings, lists and bools always serializes.
        toml::to_string(self).unwrap_or_default()
    }
}

impl PlanFileTask {
    fn into_spec(self, position: usize) -> Result<TaskSpec, PlanError> {
        let id = match self.id {
            Some(id) if !id.trim().is_empty() => id.trim().to_string(),
            _ => return Err(PlanError::MissingId { position }),
        };
        if !valid_id(&id) {
            return Err(PlanError::InvalidId { id });
        }
        let required = |value: Option<String>, field: &'static str| match value {
            Some(v) if !v.trim().is_empty() => Ok(v),
            _ => Err(PlanError::MissingField {
                id: id.clone(),
                field,
            }),
        };
        let check = required(self.check, "check")?;
        let instructions = required(self.instructions, "instructions")?;
        let title = self
            .title
            .filter(|t| !t.trim().is_empty())
            .unwrap_or_else(|| id.clone());
        Ok(TaskSpec {
            id,
            title,
            instructions,
            deps: self
                .deps
                .into_iter()
                .map(|d| d.trim().to_string())
                .collect(),
            check,
            risky: self.risky,
        })
    }
}

fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// Checks ids, dependencies and cycles of `tasks`, which may also depend on `existing` ids
/// (tasks added to a running plan).
pub fn validate_tasks(tasks: &[TaskSpec], existing: &[&str]) -> Result<(), PlanError> {
    if tasks.is_empty() {
        return Err(PlanError::Empty);
    }
    let mut positions: BTreeMap<&str, usize> = BTreeMap::new();
    for (index, task) in tasks.iter().enumerate() {
        if !valid_id(&task.id) {
            return Err(PlanError::InvalidId {
                id: task.id.clone(),
            });
        }
        if task.check.trim().is_empty() {
            return Err(PlanError::MissingField {
                id: task.id.clone(),
                field: "check",
            });
        }
        if task.instructions.trim().is_empty() {
            return Err(PlanError::MissingField {
                id: task.id.clone(),
                field: "instructions",
            });
        }
        let first = positions
            .get(task.id.as_str())
            .copied()
            .or_else(|| existing.contains(&task.id.as_str()).then_some(0));
        if let Some(first) = first {
            return Err(PlanError::DuplicateId {
                id: task.id.clone(),
                first,
                second: index + 1,
            });
        }
        positions.insert(&task.id, index + 1);
    }
    for task in tasks {
        for dep in &task.deps {
            if *dep == task.id {
                return Err(PlanError::SelfDependency {
                    id: task.id.clone(),
                });
            }
            if !positions.contains_key(dep.as_str()) && !existing.contains(&dep.as_str()) {
                return Err(PlanError::UnknownDependency {
                    id: task.id.clone(),
                    dep: dep.clone(),
                });
            }
        }
    }
    if let Some(cycle) = find_cycle(tasks) {
        return Err(PlanError::Cycle { cycle });
    }
    Ok(())
}

/// A dependency cycle as a path that starts and ends with the same id, if there is one.
fn find_cycle(tasks: &[TaskSpec]) -> Option<Vec<String>> {
    let deps: BTreeMap<&str, &[String]> = tasks
        .iter()
        .map(|t| (t.id.as_str(), t.deps.as_slice()))
        .collect();
    let mut done: BTreeSet<&str> = BTreeSet::new();
    for task in tasks {
        let mut path: Vec<&str> = Vec::new();
        if let Some(cycle) = visit(&task.id, &deps, &mut done, &mut path) {
            return Some(cycle);
        }
    }
    None
}

fn visit<'a>(
    id: &'a str,
    deps: &BTreeMap<&'a str, &'a [String]>,
    done: &mut BTreeSet<&'a str>,
    path: &mut Vec<&'a str>,
) -> Option<Vec<String>> {
    if done.contains(id) {
        return None;
    }
    if let Some(start) = path.iter().position(|p| *p == id) {
        let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
        cycle.push(id.to_string());
        return Some(cycle);
    }
    path.push(id);
    // Dependencies outside this list (already journaled tasks) cannot close a cycle through it.
    for dep in deps.get(id).copied().unwrap_or_default() {
        if deps.contains_key(dep.as_str())
            && let Some(cycle) = visit(dep, deps, done, path)
        {
            return Some(cycle);
        }
    }
    path.pop();
    done.insert(id);
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(text: &str) -> Result<Plan, PlanError> {
        PlanFile::from_toml(text)?.validate()
    }

    const VALID: &str = r#"
check = "cargo test"

[[task]]
id = "parse"
title = "Parse the input"
instructions = "Write the parser."
deps = []
check = "test -f parser.rs"

[[task]]
id = "eval"
title = "Evaluate"
instructions = "Write the evaluator."
deps = ["parse"]
check = "test -f eval.rs"
risky = true
"#;

    #[test]
    fn a_valid_plan_keeps_order_fields_and_final_check() {
        let plan = plan(VALID).unwrap();
        assert_eq!(plan.final_check.as_deref(), Some("cargo test"));
        let ids: Vec<&str> = plan.tasks.iter().map(|t| t.id.as_str()).collect();
        assert_eq!(ids, ["parse", "eval"]);
        assert_eq!(plan.tasks[1].deps, ["parse"]);
        assert!(plan.tasks[1].risky && !plan.tasks[0].risky);
    }

    #[test]
    fn toml_round_trip_gives_the_same_plan() {
        let first = plan(VALID).unwrap();
        let again = PlanFile::from_toml(&PlanFile::from_plan(&first).to_toml())
            .unwrap()
            .validate()
            .unwrap();
        assert_eq!(first, again);
    }

    #[test]
    fn json_from_the_planner_uses_the_same_fields() {
        let json = r#"{"task": [{"id": "a", "instructions": "do a", "check": "true"}]}"#;
        let plan = PlanFile::from_json(json).unwrap().validate().unwrap();
        assert_eq!(
            plan.tasks[0].title, "a",
            "a missing title defaults to the id"
        );
    }

    #[test]
    fn each_invalid_plan_gets_an_error_naming_the_problem() {
        let cases: &[(&str, &str)] = &[
            ("", "no tasks"),
            (
                "[[task]]\ntitle = \"x\"\ninstructions = \"i\"\ncheck = \"true\"",
                "task #1 has no `id`",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"",
                "task `a` has no `check`",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"  \"",
                "task `a` has no `check`",
            ),
            (
                "[[task]]\nid = \"a\"\ncheck = \"true\"",
                "task `a` has no `instructions`",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\n\
                 [[task]]\nid = \"a\"\ninstructions = \"j\"\ncheck = \"true\"",
                "task id `a` is used twice (tasks #1 and #2)",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"zz\"]",
                "task `a` depends on `zz`, which is not a task of this plan",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"a\"]",
                "task `a` depends on itself",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"c\"]\n\
                 [[task]]\nid = \"b\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"a\"]\n\
                 [[task]]\nid = \"c\"\ninstructions = \"i\"\ncheck = \"true\"\ndeps = [\"b\"]",
                "the dependencies form a cycle: a -> c -> b -> a",
            ),
            (
                "[[task]]\nid = \"a b\"\ninstructions = \"i\"\ncheck = \"true\"",
                "invalid id",
            ),
            (
                "check = \"\"\n[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"",
                "the plan's `check` is empty",
            ),
            (
                "[[task]]\nid = \"a\"\ninstructions = \"i\"\ncheck = \"true\"\nbogus = 1",
                "unknown field `bogus`",
            ),
            ("[[task]\nid = 1", "cannot be read"),
        ];
        for (text, expected) in cases {
            let error = plan(text).expect_err(text).to_string();
            assert!(
                error.contains(expected),
                "plan {text:?}: error {error:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn added_tasks_may_depend_on_existing_ones_but_not_reuse_their_ids() {
        let task = |id: &str, deps: &[&str]| TaskSpec {
            id: id.into(),
            title: id.into(),
            instructions: "i".into(),
            deps: deps.iter().map(|d| d.to_string()).collect(),
            check: "true".into(),
            risky: false,
        };
        assert_eq!(validate_tasks(&[task("fix-1", &["a"])], &["a"]), Ok(()));
        assert!(matches!(
            validate_tasks(&[task("a", &[])], &["a"]),
            Err(PlanError::DuplicateId { .. })
        ));
    }

    mod properties {
        use super::super::*;
        use proptest::prelude::*;

        proptest! {
            /// Tasks that only depend on earlier tasks never form a cycle; adding one edge from
            /// the first task to the last of a chain always does.
            #[test]
            fn backward_edges_are_acyclic_and_a_closing_edge_is_found(
                edges in proptest::collection::vec(proptest::collection::vec(any::<prop::sample::Index>(), 0..4), 1..12)
            ) {
                let mut tasks: Vec<TaskSpec> = Vec::new();
                for (i, deps) in edges.iter().enumerate() {
                    let deps: BTreeSet<String> = if i == 0 { BTreeSet::new() } else {
                        deps.iter().map(|d| format!("t{}", d.index(i))).collect()
                    };
                    tasks.push(TaskSpec {
                        id: format!("t{i}"), title: String::new(), instructions: "i".into(),
                        deps: deps.into_iter().collect(), check: "true".into(), risky: false,
                    });
                }
                prop_assert_eq!(validate_tasks(&tasks, &[]), Ok(()));
                let n = tasks.len();
                if n > 1 {
                    for (i, task) in tasks.iter_mut().enumerate().skip(1) {
                        task.deps = vec![format!("t{}", i - 1)];
                    }
                    tasks[0].deps = vec![format!("t{}", n - 1)];
                    let is_cycle = matches!(validate_tasks(&tasks, &[]), Err(PlanError::Cycle { .. }));
                    prop_assert!(is_cycle);
                }
            }
        }
    }
}
