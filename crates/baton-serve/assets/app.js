// baton dashboard: plain JavaScript, no dependencies. Everything is built with DOM calls and
// textContent (never innerHTML with data), so journal text cannot inject markup.
"use strict";

(function () {
  const app = document.getElementById("app");
  const live = document.getElementById("live");
  const SVG = "http://www.w3.org/2000/svg";
  let cleanup = [];

  // `?token=` was accepted once and the server set a cookie: take it out of the address bar.
  if (new URLSearchParams(location.search).has("token")) {
    history.replaceState(null, "", location.pathname + location.hash);
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null) continue;
      if (k === "class") node.className = v;
      else if (k === "style") node.style.cssText = v; // CSSOM: allowed by the CSP
      else if (k.startsWith("data-")) node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const c of children.flat()) {
      if (c === null || c === undefined) continue;
      node.append(typeof c === "string" || typeof c === "number" ? String(c) : c);
    }
    return node;
  }

  function svg(tag, attrs, ...children) {
    const node = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    for (const c of children) node.append(c);
    return node;
  }

  // replaceChildren would show a null as the text "null": leave those out.
  const show = (...nodes) => app.replaceChildren(...nodes.filter((n) => n !== null && n !== undefined));
  const fmt = (n) => Number(n || 0).toLocaleString("en-US");
  const time = (t) => (t ? new Date(t).toLocaleString() : "–");
  const badge = (state, label) => el("span", { class: "badge s-" + state }, label || state);
  // "41 m 12 s", "2 h 3 m", "12 s": the CLI's words.
  const duration = (ms) => {
    const s = Math.floor((ms || 0) / 1000);
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} m ${s % 60} s`;
    return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} m`;
  };

  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin" });
    const body = await r.json().catch(() => ({ error: r.statusText }));
    if (!r.ok) throw new Error(body.error || r.statusText);
    return body;
  }

  function progress(run) {
    if (run.tasks_total > 0) {
      const pct = Math.round((100 * run.tasks_done) / run.tasks_total);
      return el("span", { class: "progress" },
        el("span", { class: "bar" }, el("span", { style: "width:" + pct + "%" })),
        `${run.tasks_done}/${run.tasks_total} tasks`);
    }
    return el("span", { class: "progress" },
      run.max_turns ? `turn ${run.turns} of ${run.max_turns}` : `turn ${run.turns}`);
  }

  function tokensText(t) {
    return `${fmt(t.input)} in (${fmt(t.cached)} cached) · ${fmt(t.output)} out`;
  }

  // ---- runs list ----------------------------------------------------------------------------

  async function showRuns() {
    const render = async () => {
      let body;
      try {
        body = await getJSON("/api/runs");
      } catch (e) {
        show(el("p", { class: "error" }, "Cannot load runs: " + e.message));
        return;
      }
      // Child runs of `--parallel` come right after their parent (the server orders them).
      const rows = body.runs.map((run) =>
        el("tr", { class: run.depth > 0 ? "run-row child-row" : "run-row", "data-run-id": run.id, "data-parent": run.parent || undefined },
          el("td", { class: "run-cell", style: run.depth > 0 ? `padding-left:${10 + 18 * run.depth}px` : undefined },
            run.depth > 0 ? el("span", { class: "muted" }, "└ ") : null,
            el("a", { class: "run-link", href: "#/runs/" + run.id }, run.short_id)),
          el("td", {}, badge(run.status)),
          el("td", { class: "goal-cell" }, run.goal.length > 120 ? run.goal.slice(0, 117) + "…" : run.goal),
          el("td", {}, progress(run)),
          el("td", { class: "run-model" }, run.model || "–"),
          el("td", { class: "num run-duration" }, duration(run.running_ms)),
          el("td", { class: "num" }, fmt(run.tokens.input + run.tokens.output)),
          el("td", { class: "num run-cost" }, run.cost.text),
          el("td", {}, time(run.updated_at))));
      show(
        el("h1", {}, "Runs"),
        rows.length === 0
          ? el("p", { class: "muted" }, "No runs yet: start one with baton run \"GOAL\".")
          : el("table", { id: "runs" },
              el("thead", {}, el("tr", {},
                el("th", {}, "Run"), el("th", {}, "Status"), el("th", {}, "Goal"),
                el("th", {}, "Progress"), el("th", {}, "Model"), el("th", { class: "num" }, "Running time"),
                el("th", { class: "num" }, "Tokens"),
                el("th", { class: "num" }, "Cost"), el("th", {}, "Updated"))),
              el("tbody", {}, rows)));
    };
    await render();
    // Runs are started and driven by other processes: refresh the list while it is shown.
    const timer = setInterval(render, 3000);
    cleanup.push(() => clearInterval(timer));
  }

  // ---- run page -----------------------------------------------------------------------------

  function taskList(graph) {
    if (graph.tasks.length === 0) return el("p", { class: "muted" }, "No tasks: the run has no plan and no todo list.");
    const source = graph.source === "plan" ? "task graph" : "todo list (update_plan)";
    return el("div", {},
      el("p", { class: "muted" }, `${graph.done} of ${graph.total} done · ${source}`),
      graph.source === "plan" ? taskGraphSvg(graph.tasks) : null,
      el("ul", { class: "tasks" }, graph.tasks.map((t) =>
        el("li", { class: "task", "data-task-id": t.id },
          el("span", { class: "task-state" }, badge(t.state)),
          el("span", { class: "task-title" }, t.title),
          el("div", { class: "meta" },
            `#${t.id}`,
            t.check ? ` · check: ${t.check}` : "",
            t.approach ? ` · approach ${t.approach}, attempt ${t.attempt}` : "",
            t.last_check ? ` · last check ${t.last_check.passed ? "passed" : "failed"}` : "",
            t.reason ? ` · ${t.reason}` : ""),
          t.deps.length ? el("div", { class: "deps" }, "after " + t.deps.join(", ")) : null))),
      graph.final_check ? el("p", { class: "muted" }, "final check: " + graph.final_check +
        (graph.final_check_outcome ? (graph.final_check_outcome.passed ? " (passed)" : " (failed)") : "")) : null);
  }

  // Tasks in columns by dependency depth, edges from each dependency.
  function taskGraphSvg(tasks) {
    const byId = new Map(tasks.map((t) => [t.id, t]));
    const depth = new Map();
    const depthOf = (t, seen) => {
      if (depth.has(t.id)) return depth.get(t.id);
      if (seen.has(t.id)) return 0;
      seen.add(t.id);
      const d = t.deps.reduce((m, id) => (byId.has(id) ? Math.max(m, depthOf(byId.get(id), seen) + 1) : m), 0);
      depth.set(t.id, d);
      return d;
    };
    tasks.forEach((t) => depthOf(t, new Set()));
    const columns = [];
    tasks.forEach((t) => (columns[depth.get(t.id)] ||= []).push(t));
    const W = 170, H = 44, GX = 50, GY = 14;
    const pos = new Map();
    columns.forEach((col, c) => col.forEach((t, r) => pos.set(t.id, { x: 10 + c * (W + GX), y: 10 + r * (H + GY) })));
    const width = 20 + columns.length * (W + GX) - GX;
    const height = 20 + Math.max(...columns.map((c) => c.length)) * (H + GY) - GY;
    const colors = { verified: "#1f7a3a", done: "#1f7a3a", failed: "#b3261e", running: "#1a5fb4", checking: "#1a5fb4", skipped: "#77776f", pending: "#77776f" };
    const root = svg("svg", { width, height, viewBox: `0 0 ${width} ${height}`, class: "task-graph" });
    tasks.forEach((t) => t.deps.forEach((d) => {
      const a = pos.get(d), b = pos.get(t.id);
      if (!a || !b) return;
      root.append(svg("path", { d: `M${a.x + W},${a.y + H / 2} C${a.x + W + GX / 2},${a.y + H / 2} ${b.x - GX / 2},${b.y + H / 2} ${b.x},${b.y + H / 2}`, fill: "none", stroke: "#b5b5ad" }));
    }));
    tasks.forEach((t) => {
      const p = pos.get(t.id);
      const g = svg("g", {});
      g.append(svg("rect", { x: p.x, y: p.y, width: W, height: H, rx: 6, fill: "#fff", stroke: colors[t.state] || "#77776f", "stroke-width": 2 }));
      const title = t.title.length > 24 ? t.title.slice(0, 23) + "…" : t.title;
      const label = svg("text", { x: p.x + 8, y: p.y + 18 });
      label.textContent = title;
      const state = svg("text", { x: p.x + 8, y: p.y + 34, fill: colors[t.state] || "#77776f" });
      state.textContent = t.state;
      g.append(label, state);
      root.append(g);
    });
    return root;
  }

  // Cumulative tokens (line) and cost (dashed line) over the run's model calls.
  function costChart(detail) {
    const calls = detail.calls;
    if (calls.length === 0) return el("p", { class: "muted" }, "No model calls yet.");
    const W = 760, H = 200, L = 60, R = 70, T = 12, B = 26;
    const maxTok = Math.max(1, calls[calls.length - 1].cumulative_tokens);
    const maxUsd = Math.max(...calls.map((c) => c.cumulative_usd));
    const x = (i) => L + (calls.length === 1 ? (W - L - R) / 2 : (i * (W - L - R)) / (calls.length - 1));
    const yTok = (v) => H - B - (v / maxTok) * (H - T - B);
    const yUsd = (v) => H - B - (maxUsd > 0 ? (v / maxUsd) * (H - T - B) : 0);
    const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "cost-chart" });
    root.append(svg("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#deded8" }));
    const text = (x0, y0, s, anchor) => { const t = svg("text", { x: x0, y: y0, "text-anchor": anchor || "start" }); t.textContent = s; return t; };
    root.append(text(L - 6, T + 8, fmt(maxTok), "end"), text(L - 6, H - B, "0", "end"),
      text(W - R + 6, T + 8, calls.some((c) => c.cost_usd !== null) ? "$" + maxUsd.toFixed(4) : "cost unknown"), text(L, H - 8, "model call 1"),
      text(W - R, H - 8, `call ${detail.calls_total}`, "end"));
    const pts = (f) => calls.map((c, i) => `${x(i).toFixed(1)},${f(c).toFixed(1)}`).join(" ");
    root.append(svg("polyline", { points: pts((c) => yTok(c.cumulative_tokens)), fill: "none", stroke: "#1a5fb4", "stroke-width": 2 }));
    root.append(svg("polyline", { points: pts((c) => yUsd(c.cumulative_usd)), fill: "none", stroke: "#1f7a3a", "stroke-width": 2, "stroke-dasharray": "5 3" }));
    calls.forEach((c, i) => {
      const dot = svg("circle", { cx: x(i), cy: yTok(c.cumulative_tokens), r: 2.5, fill: "#1a5fb4" });
      const tip = svg("title", {});
      tip.textContent = `turn ${c.turn} · ${c.model} · ${fmt(c.cumulative_tokens)} tokens · ${c.cost_usd === null ? "cost unknown" : "$" + c.cumulative_usd.toFixed(4)}`;
      dot.append(tip);
      root.append(dot);
    });
    return el("div", {}, root, el("p", { class: "muted" }, "blue: cumulative tokens (input + output) · green dashed: cumulative priced cost" +
      (detail.calls_total > calls.length ? ` · ${calls.length} of ${detail.calls_total} calls shown` : "")));
  }

  // One row per turn: its model calls and tool calls as bars on a shared time axis.
  function timeline(detail) {
    const turns = detail.turns;
    if (turns.length === 0) return el("p", { class: "muted" }, "No turns yet.");
    const shown = turns.slice(-40);
    const t0 = Date.parse(shown[0].started_at);
    const end = (t) => Date.parse(t.finished_at || detail.run.updated_at);
    const t1 = Math.max(t0 + 1, ...shown.map(end));
    const W = 760, L = 60, R = 10, RH = 18;
    const H = shown.length * RH + 24;
    const x = (ms) => L + ((ms - t0) / (t1 - t0)) * (W - L - R);
    const root = svg("svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, class: "timeline" });
    const first = shown[0].turn;
    const toolsByTurn = new Map();
    detail.tools.forEach((tc) => { if (tc.turn >= first) (toolsByTurn.get(tc.turn) || toolsByTurn.set(tc.turn, []).get(tc.turn)).push(tc); });
    shown.forEach((t, i) => {
      const y = 4 + i * RH;
      const label = svg("text", { x: 4, y: y + 12 });
      label.textContent = "turn " + t.turn;
      root.append(label);
      const s = Date.parse(t.started_at);
      root.append(svg("rect", { x: x(s), y: y + 3, width: Math.max(2, x(end(t)) - x(s)), height: RH - 6, fill: "#e3e9f3" }));
      (toolsByTurn.get(t.turn) || []).forEach((tc) => {
        const ts = Date.parse(tc.started_at);
        // Journal times and measured durations come from different clocks: keep bars inside.
        const right = Math.min(W - R, x(ts + (tc.duration_ms || 0)));
        const bar = svg("rect", { x: Math.min(x(ts), W - R - 3), y: y + 5, width: Math.max(3, right - x(ts)), height: RH - 10,
          fill: tc.outcome === "success" ? "#1f7a3a" : tc.outcome === null ? "#1a5fb4" : "#b3261e" });
        const tip = svg("title", {});
        tip.textContent = `${tc.name} · ${tc.duration_ms === null ? "running" : tc.duration_ms + " ms"} · ${tc.outcome || "in progress"}`;
        bar.append(tip);
        root.append(bar);
      });
    });
    const axis = svg("text", { x: W - R, y: H - 4, "text-anchor": "end" });
    axis.textContent = `${((t1 - t0) / 1000).toFixed(1)} s`;
    root.append(axis);
    const total = Math.max(detail.turns_total, turns.length);
    return el("div", {}, total > shown.length ? el("p", { class: "muted" }, `last ${shown.length} of ${total} turns`) : null,
      root, el("p", { class: "muted" }, "pale: turn · green: tool call succeeded · red: failed · blue: running"));
  }

  function card(k, v, id) {
    return el("div", { class: "card" }, el("div", { class: "k" }, k), el("div", { class: "v", id }, v));
  }

  function renderRun(detail, transcript) {
    const run = detail.run;
    const retries = Object.entries(detail.retries).map(([k, v]) => `${k.replace(/_/g, " ")}: ${v}`).join(", ");
    show(
      el("p", {}, el("a", { href: "#/" }, "← all runs")),
      el("h1", { id: "run-title" }, "Run ", run.short_id, " ", badge(run.status, run.status_label)),
      el("p", { class: "goal" }, run.goal),
      el("div", { class: "cards" },
        card("cost", run.cost.text, "run-cost"),
        card("tokens", tokensText(run.tokens), "run-tokens"),
        card("turns", run.max_turns ? `${run.turns} / ${run.max_turns}` : String(run.turns)),
        card("model calls", String(run.model_calls)),
        card("tool calls", String(run.tool_calls)),
        card("tasks", run.tasks_total ? `${run.tasks_done} / ${run.tasks_total}` : "–", "run-tasks"),
        card("model", run.model || "–", "run-model"),
        card("running time", duration(run.running_ms), "run-duration")),
      // A pause is a normal stop (a limit, or a question for a person), not a failure.
      run.pause ? el("p", { class: "notice", id: "run-pause" },
        el("strong", {}, `paused (${run.pause.reason.replace(/_/g, " ")})`),
        run.pause.needs_person ? " · needs a person" : " · baton resume continues",
        el("br", {}), run.pause.detail) : null,
      run.error ? el("p", { class: "error" }, "failed: " + run.error) : null,
      run.summary ? el("p", {}, el("strong", {}, run.finished_by === "text" ? "summary (ended by a text reply): " : "summary: "), run.summary) : null,
      retries ? el("p", { class: "muted" }, "failed model call attempts: " + retries) : null,
      el("h2", {}, "Tasks"), el("div", { id: "tasks" }, taskList(detail.tasks)),
      el("h2", {}, "Transcript"), transcript,
      el("h2", {}, "Tokens and cost"), costChart(detail),
      el("h2", {}, "Timeline"), timeline(detail),
      el("p", { class: "muted" }, `${fmt(run.event_count)} events · created ${time(run.created_at)} · updated ${time(run.updated_at)}`));
  }

  // The transcript starts this many events before the end; "show all" loads the rest.
  const TRANSCRIPT_EVENTS = 3000;

  async function showRun(id) {
    let detail;
    let transcript = null;
    const box = el("div", { class: "transcript", id: "transcript" });
    const load = async () => {
      try {
        detail = await getJSON("/api/runs/" + encodeURIComponent(id));
      } catch (e) {
        show(el("p", {}, el("a", { href: "#/" }, "← all runs")),
          el("p", { class: "error" }, "Cannot load run " + id + ": " + e.message));
        return false;
      }
      renderRun(detail, box);
      // Only a run a live process is driving gets the badge.
      live.hidden = detail.run.status !== "running";
      return true;
    };
    if (!(await load())) return;
    const runId = encodeURIComponent(detail.run.id);
    let closed = false;

    // History from `from` up to where the page was drawn, page by page; the stream may
    // already have fed later events, which the transcript holds until their turn.
    const history = async (from) => {
      let after = from - 1;
      for (;;) {
        const q = after >= 0 ? `?after=${after}&limit=1000` : "?limit=1000";
        const page = await getJSON(`/api/runs/${runId}/events${q}`);
        if (closed) return;
        transcript.feed(page.events);
        if (!page.has_more || page.next_after === null) return;
        after = page.next_after;
      }
    };
    const begin = async (from) => {
      box.replaceChildren();
      if (from > 0) {
        box.append(el("p", { class: "muted" }, `${fmt(from)} earlier events not shown · `,
          el("button", { type: "button", class: "link", onclick: () => begin(0) }, "show the whole transcript")));
      }
      const root = el("div", {});
      box.append(root);
      transcript = window.BatonTranscript.create(el, root, from);
      try {
        await history(from);
      } catch (e) {
        box.append(el("p", { class: "error" }, "Cannot load the transcript: " + e.message));
      }
    };
    const started = begin(Math.max(0, detail.run.event_count - TRANSCRIPT_EVENTS));

    let pending = null;
    const source = new EventSource(`/api/runs/${runId}/stream?after=${detail.run.event_count - 1}`);
    source.onmessage = (m) => {
      let record;
      try { record = JSON.parse(m.data); } catch (_) { return; }
      started.then(() => {
        // Follow a live run's newest events unless the reader scrolled up to read.
        const atEnd = box.scrollTop + box.clientHeight >= box.scrollHeight - 30;
        transcript.feed([record]);
        if (atEnd) box.scrollTop = box.scrollHeight;
      });
      // Many events come in bursts: reload the summary once per burst.
      if (!pending) pending = setTimeout(() => { pending = null; load(); }, 300);
    };
    // The run has ended: one last reload so the page shows how.
    source.addEventListener("end", () => { source.close(); live.hidden = true; if (!pending) load(); });
    cleanup.push(() => { closed = true; source.close(); live.hidden = true; if (pending) clearTimeout(pending); });
  }

  function route() {
    cleanup.forEach((f) => f());
    cleanup = [];
    const m = location.hash.match(/^#\/runs\/([^/]+)$/);
    if (m) showRun(decodeURIComponent(m[1]));
    else showRuns();
  }

  window.addEventListener("hashchange", route);
  route();
})();
