// baton dashboard: a run's transcript, built from its journal events (the events API for what
// is already there, the live stream for what comes). Like app.js: DOM calls and textContent
// only, so journal text can never inject markup.
"use strict";

window.BatonTranscript = (function () {
  // Output longer than this many lines (or characters) is cut, the rest one click away.
  const SHOWN_LINES = 12;
  const SHOWN_CHARS = 1500;

  function seconds(ms) {
    if (ms === null || ms === undefined) return "";
    return ms < 1000 ? `${ms} ms` : `${(ms / 1000).toFixed(1)} s`;
  }

  // Words for snake_case values (`rate_limited` → "rate limited").
  const words = (s) => String(s || "").replace(/_/g, " ");

  // Builds a transcript into `root`. `el(tag, attrs, ...children)` is app.js's DOM helper.
  // Events may arrive in any order and more than once (a page of history and the live stream
  // overlap): they are rendered strictly in journal order, each once.
  function create(el, root, firstSeq) {
    let next = firstSeq;
    const waiting = new Map();
    let turn = null; // the current turn's section: events inside a turn go there
    const tools = new Map(); // call id → its result slot
    const checks = new Map(); // task (or "" for the final check) → its result slot
    let retry = null; // the last "model call failed" line, to fold repeats into

    function abridged(text, cls) {
      const full = String(text || "");
      const lines = full.split("\n");
      let head = lines.slice(0, SHOWN_LINES).join("\n");
      if (head.length > SHOWN_CHARS) head = head.slice(0, SHOWN_CHARS);
      if (head.length === full.length) return el("pre", { class: cls }, full);
      const rest = full.length - head.length;
      const more = lines.length > SHOWN_LINES ? `${lines.length - SHOWN_LINES} more lines` : `${rest} more characters`;
      const shown = el("pre", { class: `${cls} cut` }, head + "…");
      const details = el("details", { class: "more" }, el("summary", {}, `… ${more}`), el("pre", { class: cls }, full));
      // Opened, the whole text replaces the cut one (not shown twice): by the stylesheet, in the
      // same style pass that shows the whole text — the `toggle` event comes a task later.
      return el("div", { class: "abridged" }, shown, details);
    }

    // A tool call's arguments in one line: the command of a shell call, the path of a file
    // tool, else the compact JSON (or the raw text when the model sent invalid JSON).
    function argumentsText(name, raw) {
      let args;
      try { args = JSON.parse(raw); } catch (_) { return String(raw).slice(0, 300); }
      if (args && typeof args === "object") {
        if (typeof args.command === "string") return args.command;
        if (typeof args.path === "string" && Object.keys(args).length <= 2) return args.path;
      }
      const text = JSON.stringify(args);
      return text.length > 300 ? text.slice(0, 299) + "…" : text;
    }

    function place(node) {
      (turn || root).append(node);
      return node;
    }

    function line(cls, ...children) {
      retry = null;
      return place(el("div", { class: "tx-line " + cls }, ...children));
    }

    function startTurn(n, at) {
      retry = null;
      turn = el("section", { class: "tx-turn", "data-turn": String(n) },
        el("h3", {}, `Turn ${n}`, el("span", { class: "muted" }, " · " + new Date(at).toLocaleTimeString())));
      root.append(turn);
    }

    function modelFailed(e) {
      const text = `model call failed (${words(e.class)}): ${e.message}`;
      if (retry && retry.text === text) {
        retry.count += 1;
        retry.more.textContent = ` … ${retry.count} more attempts, same error`;
        return;
      }
      const more = el("span", { class: "muted" });
      line("tx-retry", text, e.retry_in_ms !== null && e.retry_in_ms !== undefined ? ` — retrying in ${seconds(e.retry_in_ms)}` : "", more);
      retry = { text, count: 0, more };
    }

    function modelFinished(e) {
      retry = null;
      const m = e.message || {};
      // The readable part of each reasoning part (encrypted ones have none).
      const reasoning = (Array.isArray(m.reasoning) ? m.reasoning : [])
        .map((r) => r.text || r.thinking || r.summary || "")
        .filter((t) => t.trim()).join("\n\n");
      // An OpenAI compaction item: opaque, but worth a line.
      if ((Array.isArray(m.reasoning) ? m.reasoning : []).some((r) => r.type === "item" && /"type"\s*:\s*"compaction/.test(r.json || ""))) {
        line("tx-meta", "context compacted by the provider (its opaque compaction item goes back with later requests)");
      }
      if (reasoning) {
        place(el("div", { class: "tx-reasoning" }, el("div", { class: "tx-who" }, "thinking"), abridged(reasoning, "reasoning")));
      }
      if (m.content) place(el("div", { class: "tx-text" }, el("div", { class: "tx-who" }, "model"), abridged(m.content, "text")));
      if (!m.content && !(m.tool_calls || []).length) line("muted", "the model replied with nothing");
    }

    function toolStarted(e) {
      retry = null;
      const result = el("div", { class: "tx-result muted" }, "running…");
      const node = el("div", { class: "tx-tool", "data-call-id": e.call_id },
        el("div", { class: "tx-call" }, el("span", { class: "tx-tool-name" }, e.name), " ",
          el("code", { class: "tx-args" }, argumentsText(e.name, e.arguments))),
        result);
      tools.set(e.call_id, result);
      place(node);
    }

    function toolFinished(e) {
      const r = e.result || {};
      const head = el("div", { class: "tx-outcome o-" + r.outcome },
        r.outcome === "success" ? "✔" : r.outcome === "error" ? "✘ error" : "⚠ " + words(r.outcome),
        r.exit_code !== undefined && r.exit_code !== null ? ` · exit ${r.exit_code}` : "",
        ` · ${seconds(e.duration_ms)}`);
      const body = r.content ? abridged(r.content, "output") : null;
      let slot = tools.get(e.call_id);
      tools.delete(e.call_id);
      if (!slot) {
        // Its start is on an earlier page than the one loaded.
        slot = place(el("div", { class: "tx-tool", "data-call-id": e.call_id }, el("div", { class: "tx-call muted" }, "tool call " + e.call_id)));
      }
      slot.className = "tx-result";
      slot.replaceChildren(head, body || "");
    }

    function checkStarted(e) {
      const result = el("span", { class: "muted" }, " running…");
      line("tx-check", el("strong", {}, e.task ? `check of ${e.task}` : "final check"), ": ", el("code", {}, e.command), result);
      checks.set(e.task || "", result);
    }

    function checkFinished(e) {
      const verdict = el("span", { class: e.passed ? "ok" : "bad" }, e.passed ? " ✔ passed" : " ✘ failed");
      const info = `${e.exit_code === null ? " (did not exit)" : ` (exit ${e.exit_code})`} · ${seconds(e.duration_ms)}`;
      const slot = checks.get(e.task || "");
      checks.delete(e.task || "");
      if (slot) slot.replaceChildren(verdict, info);
      else line("tx-check", e.task ? `check of ${e.task}` : "final check", verdict, info);
      if (!e.passed && e.output) place(abridged(e.output, "output"));
    }

    function end(cls, label, text) {
      turn = null;
      line("tx-end " + cls, el("strong", {}, label), text ? " " + text : "");
    }

    function render(r) {
      const e = r;
      switch (e.type) {
        case "run_started": turn = null; return line("tx-meta", `started · model ${e.settings.model.model} · at most ${e.settings.limits.max_turns} turns`);
        case "run_resumed": turn = null; return line("tx-meta", `resumed · model ${e.settings.model.model} · at most ${e.settings.limits.max_turns} turns`);
        case "supervisor_restarted": turn = null; return line("tx-meta", `the agent process ended (${e.cause}); restart ${e.attempt}`);
        case "turn_started": return startTurn(e.turn, e.at);
        case "turn_finished": retry = null; turn = null; return;
        case "model_call_started": return;
        case "model_call_failed": return modelFailed(e);
        case "model_call_finished": return modelFinished(e);
        case "tool_call_started": return toolStarted(e);
        case "tool_call_finished": return toolFinished(e);
        case "compaction_started": return line("tx-meta", `compacting the context: ${e.replaced} entries (${words(e.trigger)})`);
        case "compaction_failed": return line("tx-retry", `compaction failed (${words(e.class)}): ${e.message}`);
        case "compaction_finished": return place(el("details", { class: "tx-line tx-meta" },
          el("summary", {}, `context compacted: ${e.replaced} entries now stand as a summary`), el("pre", { class: "text" }, e.summary)));
        case "note_added": return line("tx-note", el("strong", {}, "note to the model: "), e.text);
        case "budget_warning": return line("tx-note", `budget warning: ${words(e.resource)} ${Number(e.used).toFixed(2)} of ${Number(e.limit).toFixed(2)}`);
        case "loop_detected": return line("tx-note", `going in circles (${words(e.pattern)}): ${e.detail}`);
        case "plan_set": return line("tx-meta", `plan: ${e.tasks.length} task${e.tasks.length === 1 ? "" : "s"} (${words(e.source)})`);
        case "task_started": turn = null; return line("tx-task", `▶ task ${e.task}`, el("span", { class: "muted" }, ` · approach ${e.approach}, attempt ${e.attempt}`));
        case "check_started": return checkStarted(e);
        case "check_finished": return checkFinished(e);
        case "task_finished": turn = null; return line("tx-task ok", `✔ task ${e.task} verified: `, e.summary);
        case "task_failed": turn = null; return line("tx-task bad", `✘ task ${e.task} failed: `, e.reason);
        case "task_skipped": return line("tx-task muted", `task ${e.task} skipped: ${e.reason}`);
        case "task_delegated": return line("tx-task", `⇉ task ${e.task} handed to run `, el("a", { href: "#/runs/" + e.child_run }, e.child_run.slice(0, 12)));
        case "task_returned": return line("tx-task", `⇇ task ${e.task} came back (${words(e.result.outcome)}) from run `, el("a", { href: "#/runs/" + e.child_run }, e.child_run.slice(0, 12)));
        case "merge_started": return line("tx-meta", `merging task ${e.task}`);
        case "merge_conflicted": return line("tx-note", `merging task ${e.task} conflicted in ${e.conflicts.join(", ")}: follow-up task ${e.follow_up.id}`);
        case "snapshot_taken": return line("tx-meta", `snapshot ${e.snapshot.slice(0, 12)} (${words(e.reason)})`);
        case "rollback_started": return line("tx-note", `rolling back to ${e.snapshot.slice(0, 12)}: ${e.reason}`);
        case "rollback_finished": return;
        case "text_end_accepted": return line("tx-meta", "the model's plain-text reply is taken as its summary");
        case "run_paused": return end("paused", `paused (${words(e.reason)}):`, e.detail);
        case "run_finished": return end("finished", "finished:", e.summary);
        case "run_failed": return end("failed", "failed:", e.error);
        default: return line("muted", e.type); // from a newer baton
      }
    }

    // Takes records (any order, duplicates allowed) and renders what is next in line.
    function feed(records) {
      for (const r of records) if (r.seq >= next) waiting.set(r.seq, r);
      while (waiting.has(next)) {
        const r = waiting.get(next);
        waiting.delete(next);
        next += 1;
        try { render(r); } catch (err) { line("error", `event #${r.seq} (${r.type}) could not be shown: ${err.message}`); }
      }
    }

    return { feed, next: () => next };
  }

  return { create };
})();
