//! How each family of journal events opens and ends spans: [`SpanBuilder::push`] hands an
//! event to its family's function here.

use super::*;

impl SpanBuilder {
    /// The run's own span: start, resume, pause, end.
    pub(super) fn push_run(&mut self, record: &EventRecord, out: &mut Vec<SpanRecord>) {
        let at = record.at;
        let run = self.run_id.clone();
        match &record.event {
            Event::RunStarted { goal, settings, .. } => {
                self.model = Some(ModelInfo::of(settings));
                let open = Open {
                    id: self.run_span(),
                    parent: None,
                    name: "invoke_agent baton".into(),
                    kind: Kind::Internal,
                    start: at,
                    attributes: Vec::new(),
                }
                .attr("gen_ai.operation.name", "invoke_agent")
                .attr("gen_ai.agent.name", "baton")
                .attr("gen_ai.conversation.id", run.to_string())
                .attr("baton.run.id", run.to_string())
                .attr("baton.goal.chars", goal.chars().count() as u64);
                self.run = Some(self.model_attrs(open));
            }
            Event::RunResumed { settings } => {
                self.model = Some(ModelInfo::of(settings));
                self.abandon_in_flight(at, out);
            }
            // Journaled by the supervisor, which exports nothing: what was in flight ends at the
            // next process's `run_resumed`, which that process exports.
            Event::SupervisorRestarted { .. } => {}
            Event::RunPaused { .. } => {
                // The run goes on later (resume): only what was in flight ends here.
                self.abandon_in_flight(at, out);
            }
            Event::RunFinished { .. } => self.end_run(at, Status::Ok, 0, out),
            Event::RunFailed { error } => self.end_run(at, Status::Error(error.clone()), 1, out),
            _ => {}
        }
    }

    /// Turn spans and the model-call spans inside them.
    pub(super) fn push_turn(&mut self, record: &EventRecord, out: &mut Vec<SpanRecord>) {
        let at = record.at;
        let run = self.run_id.clone();
        match &record.event {
            Event::TurnStarted { turn } => {
                if let Some(old) = self.turn.take() {
                    out.push(old.end(at, Status::Unset, Vec::new()));
                }
                self.turns = self.turns.max(*turn);
                let parent = self.task_or_run();
                self.turn = Some(
                    Open::new(&run, record, parent, format!("turn {turn}"), Kind::Internal)
                        .attr("baton.turn", *turn),
                );
            }
            Event::TurnFinished { .. } => {
                if let Some(turn) = self.turn.take() {
                    out.push(turn.end(at, Status::Unset, Vec::new()));
                }
            }
            Event::ModelCallStarted {
                turn,
                call,
                attempt,
                context,
                ..
            } => {
                if let Some(old) = self.model_call.take() {
                    out.push(interrupted(old, at));
                }
                let parent = self.turn_or_up();
                let mut open = Open::new(
                    &run,
                    record,
                    parent,
                    format!("chat {}", self.model_name()),
                    Kind::Client,
                )
                .attr("gen_ai.operation.name", "chat")
                .attr("baton.turn", *turn)
                .attr("baton.call", *call)
                .attr("baton.attempt", *attempt);
                if let Some(context) = context {
                    open = open
                        .attr(
                            "baton.context.estimated_prompt_tokens",
                            context.estimated_prompt_tokens,
                        )
                        .attr("baton.context.window_tokens", context.window_tokens);
                }
                self.model_call = Some(self.model_attrs(open));
            }
            Event::ModelCallFailed {
                class, retry_in_ms, ..
            } => {
                if let Some(open) = self.model_call.take() {
                    let class = snake(class);
                    let mut extra: Attrs = vec![("error.type", class.clone().into())];
                    if let Some(ms) = retry_in_ms {
                        extra.push(("baton.retry_in_ms", (*ms).into()));
                    }
                    out.push(open.end(at, Status::Error(class), extra));
                }
            }
            Event::ModelCallFinished {
                usage,
                cost_usd,
                finish_reason,
                served_model,
                ..
            } => {
                let extra = self.reply(usage, *cost_usd, served_model, finish_reason.as_ref());
                if let Some(open) = self.model_call.take() {
                    out.push(open.end(at, Status::Unset, extra));
                }
            }
            _ => {}
        }
    }

    /// A model's reply (a call's or a compaction's) counted into the run's totals, and the
    /// attributes that end its span: usage, the model that served it, why it stopped (calls
    /// only), its cost.
    fn reply(
        &mut self,
        usage: &Option<Usage>,
        cost_usd: Option<f64>,
        served_model: &Option<String>,
        finish_reason: Option<&String>,
    ) -> Attrs {
        if let Some(usage) = usage {
            self.add_usage(usage);
        }
        self.cost_usd += cost_usd.unwrap_or(0.0);
        let mut extra = usage.as_ref().map(usage_attrs).unwrap_or_default();
        if let Some(model) = served_model {
            extra.push(("gen_ai.response.model", model.as_str().into()));
        }
        if let Some(reason) = finish_reason {
            extra.push((
                "gen_ai.response.finish_reasons",
                Value::StrList(vec![reason.clone()]),
            ));
        }
        if let Some(cost) = cost_usd {
            extra.push(("baton.cost_usd", cost.into()));
        }
        extra
    }

    /// Tool-call spans.
    pub(super) fn push_tool(&mut self, record: &EventRecord, out: &mut Vec<SpanRecord>) {
        let at = record.at;
        let run = self.run_id.clone();
        match &record.event {
            Event::ToolCallStarted {
                turn,
                call_id,
                name,
                effect,
                ..
            } => {
                if let Some(old) = self.tools.remove(call_id) {
                    out.push(interrupted(old, at));
                }
                let parent = self.turn_or_up();
                let open = Open::new(
                    &run,
                    record,
                    parent,
                    format!("execute_tool {name}"),
                    Kind::Internal,
                )
                .attr("gen_ai.operation.name", "execute_tool")
                .attr("gen_ai.tool.name", name.as_str())
                .attr("gen_ai.tool.call.id", call_id.as_str())
                .attr("gen_ai.tool.type", "function")
                .attr("baton.turn", *turn)
                .attr("baton.tool.effect", snake(effect));
                self.tools.insert(call_id.clone(), open);
            }
            Event::ToolCallFinished {
                call_id, result, ..
            } => {
                if let Some(open) = self.tools.remove(call_id) {
                    let mut extra: Attrs = Vec::new();
                    if let Some(code) = result.exit_code {
                        extra.push(("baton.exit_code", code.into()));
                    }
                    let status = match result.outcome {
                        ToolOutcome::Success => Status::Unset,
                        ToolOutcome::Error => {
                            extra.push(("error.type", "tool_error".into()));
                            Status::Error("tool_error".into())
                        }
                        ToolOutcome::Interrupted => {
                            extra.push(("error.type", "interrupted".into()));
                            Status::Error("interrupted".into())
                        }
                    };
                    out.push(open.end(at, status, extra));
                }
            }
            _ => {}
        }
    }

    /// Compaction spans.
    pub(super) fn push_compaction(&mut self, record: &EventRecord, out: &mut Vec<SpanRecord>) {
        let at = record.at;
        let run = self.run_id.clone();
        match &record.event {
            Event::CompactionStarted {
                turn,
                replaced,
                trigger,
                estimated_prompt_tokens,
            } => {
                let parent = self.turn_or_up();
                let open = Open::new(
                    &run,
                    record,
                    parent,
                    format!("chat {}", self.model_name()),
                    Kind::Client,
                )
                .attr("gen_ai.operation.name", "chat")
                .attr("baton.compaction", true)
                .attr("baton.turn", *turn)
                .attr("baton.compaction.replaced", *replaced)
                .attr("baton.compaction.trigger", snake(trigger))
                .attr(
                    "baton.context.estimated_prompt_tokens",
                    *estimated_prompt_tokens,
                );
                self.compaction = Some(self.model_attrs(open));
            }
            Event::CompactionFailed {
                class,
                retry_in_ms,
                attempt,
                ..
            } => {
                // Retried attempts belong to the same compaction; only the last failure ends it.
                if retry_in_ms.is_none()
                    && let Some(open) = self.compaction.take()
                {
                    let class = snake(class);
                    out.push(open.end(
                        at,
                        Status::Error(class.clone()),
                        vec![
                            ("error.type", class.into()),
                            ("baton.attempt", (*attempt).into()),
                        ],
                    ));
                }
            }
            Event::CompactionFinished {
                usage,
                cost_usd,
                served_model,
                left_out,
                ..
            } => {
                let mut extra = self.reply(usage, *cost_usd, served_model, None);
                if let Some(open) = self.compaction.take() {
                    extra.push(("baton.compaction.left_out", (*left_out).into()));
                    out.push(open.end(at, Status::Unset, extra));
                }
            }
            _ => {}
        }
    }

    /// Task, check and rollback spans.
    pub(super) fn push_task(&mut self, record: &EventRecord, out: &mut Vec<SpanRecord>) {
        let at = record.at;
        let run = self.run_id.clone();
        match &record.event {
            Event::TaskStarted {
                task,
                approach,
                attempt,
            } => {
                // Tasks run one at a time: a new start (the next task, or the same task's next
                // attempt in a fresh context) ends the one in progress.
                self.end_task(at, "superseded", Status::Unset, out);
                let parent = self.run_span();
                self.task = Some(
                    Open::new(&run, record, parent, format!("task {task}"), Kind::Internal)
                        .attr("baton.task.id", task.as_str())
                        .attr("baton.task.approach", *approach)
                        .attr("baton.task.attempt", *attempt),
                );
            }
            Event::TaskFinished { task, .. } => match self.delegated.remove(task) {
                Some(open) => out.push(open.end(at, Status::Ok, outcome("finished"))),
                None => self.end_task(at, "finished", Status::Ok, out),
            },
            Event::TaskFailed { task, reason } => match self.delegated.remove(task) {
                Some(open) => {
                    out.push(open.end(at, Status::Error(reason.clone()), outcome("failed")))
                }
                None => self.end_task(at, "failed", Status::Error(reason.clone()), out),
            },
            Event::TaskDelegated {
                task, child_run, ..
            } => {
                let parent = self.run_span();
                let open = Open::new(&run, record, parent, format!("task {task}"), Kind::Internal)
                    .attr("baton.task.id", task.as_str())
                    .attr("baton.task.child_run", child_run.as_str());
                self.delegated.insert(task.clone(), open);
            }
            Event::TaskReturned { cost_usd, .. } => {
                self.cost_usd += cost_usd;
            }
            Event::MergeStarted { .. } => {}
            Event::MergeConflicted { task, .. } => {
                if let Some(open) = self.delegated.remove(task) {
                    out.push(open.end(at, Status::Unset, outcome("merge_conflicted")));
                }
            }
            Event::TaskSkipped { task, reason } => {
                let parent = self.run_span();
                out.push(
                    Open::new(&run, record, parent, format!("task {task}"), Kind::Internal)
                        .attr("baton.task.id", task.as_str())
                        .end(
                            at,
                            Status::Unset,
                            vec![
                                ("baton.task.outcome", "skipped".into()),
                                ("baton.task.skip_reason", reason.as_str().into()),
                            ],
                        ),
                );
            }
            Event::CheckStarted {
                task,
                attempt,
                command,
            } => {
                let parent = self.task_or_run();
                let name = match task {
                    Some(task) => format!("check {task}"),
                    None => "check final".to_string(),
                };
                let open = Open::new(&run, record, parent, name, Kind::Internal)
                    .attr("baton.check.attempt", *attempt)
                    .attr("baton.check.command", command.as_str());
                self.checks.insert(task.clone(), open);
            }
            Event::CheckFinished {
                task,
                passed,
                exit_code,
                ..
            } => {
                if let Some(open) = self.checks.remove(task) {
                    let mut extra: Attrs = vec![("baton.check.passed", (*passed).into())];
                    if let Some(code) = exit_code {
                        extra.push(("baton.exit_code", (*code).into()));
                    }
                    let status = if *passed {
                        Status::Ok
                    } else {
                        extra.push(("error.type", "check_failed".into()));
                        Status::Error("check failed".into())
                    };
                    out.push(open.end(at, status, extra));
                }
            }
            Event::RollbackStarted { task, snapshot, .. } => {
                let parent = self.task_or_run();
                let open = Open::new(&run, record, parent, "rollback".into(), Kind::Internal)
                    .attr("baton.snapshot", snapshot.as_str());
                self.rollbacks.insert(task.clone(), open);
            }
            Event::RollbackFinished { task, .. } => {
                if let Some(open) = self.rollbacks.remove(task) {
                    out.push(open.end(at, Status::Unset, Vec::new()));
                }
            }
            _ => {}
        }
    }
}

/// The span of a call that was still open when the next one of its kind started: the process
/// doing it was interrupted.
fn interrupted(open: Open, at: Timestamp) -> SpanRecord {
    open.end(
        at,
        Status::Error("interrupted".into()),
        vec![("error.type", "interrupted".into())],
    )
}
