// legato web UI: a run's timeline (model calls, tool calls, approvals, sub-agents) built
// from its journal, each row expandable to the journal events it stands for; and the
// sub-agent tree, whose nodes open the child's own timeline.
"use strict";

function fmtSeconds(s) {
  if (s === undefined || s === null) return "";
  return s < 1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}

function fmtTokens(u) {
  if (!u) return "";
  const input = u.input_tokens || 0;
  const output = u.output_tokens || 0;
  return input || output ? `${input} in · ${output} out` : "tokens not reported";
}

function fmtCost(c) { return c === null || c === undefined ? "" : `$${c.toFixed(6)}`; }

// Journal events -> rows {kind, label, detail, duration, events[], childRunId}.
function timelineRows(events) {
  const rows = [];
  const calls = new Map(); // call id -> its row
  const children = new Map(); // child run id -> its row
  for (const e of events) {
    const k = e.kind;
    if (k === "model_requested") {
      rows.push({ kind: "model", label: `model call ${e.step}`, detail: e.model, events: [e] });
    } else if (k === "model_responded") {
      const row = [...rows].reverse().find((r) => r.kind === "model" && !r.done) || { kind: "model", label: `model call ${e.step}`, events: [] };
      if (!rows.includes(row)) rows.push(row);
      row.done = true;
      row.events.push(e);
      row.duration = e.duration;
      const r = e.response || {};
      row.tokens = fmtTokens(r.usage);
      row.cost = fmtCost(r.cost);
      const parts = ((r.message || {}).parts || []);
      const asked = parts.filter((p) => p.kind === "tool_call").map((p) => p.name);
      row.detail = asked.length ? `asked for ${asked.join(", ")}` : "answered";
    } else if (k === "tool_call_started" || k === "tool_call_finished") {
      const call = e.call || {};
      let row = calls.get(call.id);
      if (!row) {
        row = { kind: "tool", label: call.name, detail: "running", events: [] };
        calls.set(call.id, row);
        rows.push(row);
      }
      row.events.push(e);
      if (k === "tool_call_finished") { row.detail = e.outcome; row.duration = e.duration; row.outcome = e.outcome; }
    } else if (k === "approval_requested" || k === "approval_decided") {
      const id = e.request_id;
      let row = rows.find((r) => r.kind === "approval" && r.requestId === id);
      if (!row) {
        row = { kind: "approval", requestId: id, label: `approval: ${(e.call && e.call.name) || "call"}`, detail: "waiting", events: [] };
        rows.push(row);
      }
      row.events.push(e);
      const call = calls.get(e.call ? e.call.id : e.call_id);
      if (k === "approval_decided") {
        row.detail = e.verdict;
        row.outcome = e.verdict === "reject" ? "rejected" : "ok";
        if (call && call.detail === "waits for approval") call.detail = e.verdict === "reject" ? "rejected" : "running";
      } else if (call && call.detail === "running") {
        call.detail = "waits for approval";
      }
    } else if (k === "spawn_started" || k === "spawn_finished") {
      const lineage = e.lineage || {};
      let row = children.get(lineage.run_id);
      if (!row) {
        row = { kind: "child", label: `sub-agent ${lineage.agent}`, detail: e.task || "", events: [], childRunId: lineage.run_id };
        children.set(lineage.run_id, row);
        rows.push(row);
      }
      row.events.push(e);
      if (k === "spawn_finished") {
        row.outcome = e.outcome;
        row.detail = `${e.outcome} · ${e.steps || 0} model calls`;
        row.tokens = fmtTokens(e.usage);
      }
    } else if (k === "run_finished" || k === "run_failed" || k === "parked" || k === "cancel_requested") {
      const label = { run_finished: "finished", run_failed: "failed", parked: "parked for approval", cancel_requested: "cancel requested" }[k];
      rows.push({ kind: "end", label, detail: e.message || e.error_type || "", events: [e], tokens: fmtTokens(e.usage), cost: fmtCost(e.cost), outcome: k === "run_failed" ? "error" : "ok" });
    } else if (k === "run_started" || k === "user_prompt") {
      rows.push({ kind: "start", label: k === "run_started" ? `started (${e.agent})` : "prompt", detail: k === "run_started" ? e.model : "", events: [e] });
    }
  }
  return rows;
}

// The rows a reader opened in `list`, if it shows `runId`: a redraw of the same run (a new
// event arrived) keeps them open instead of folding everything back.
function openRows(list, runId) {
  if (list.dataset.runId !== runId) return new Set();
  return new Set([...list.querySelectorAll(".tl-head[aria-expanded='true']")].map((h) => h.dataset.key));
}

function drawTimeline(events, list, runId) {
  const open = openRows(list, runId);
  list.replaceChildren();
  list.dataset.runId = runId || "";
  const rows = timelineRows(events);
  const longest = Math.max(0.001, ...rows.map((r) => r.duration || 0));
  rows.forEach((row, index) => {
    const item = el("li", `tl-row tl-${row.kind}${row.outcome ? ` tl-${row.outcome}` : ""}`);
    const head = el("button", "tl-head");
    head.type = "button";
    head.dataset.key = `${index}:${row.kind}:${row.label}`;
    head.setAttribute("aria-expanded", "false");
    head.append(el("span", "tl-label", row.label));
    head.append(el("span", "tl-detail", row.detail || ""));
    const nums = el("span", "tl-nums", [fmtSeconds(row.duration), row.tokens, row.cost].filter(Boolean).join(" · "));
    head.append(nums);
    const bar = el("span", "tl-bar");
    bar.style.setProperty("--w", `${Math.round(((row.duration || 0) / longest) * 100)}%`);
    head.append(bar);
    const body = el("pre", "tl-events", row.events.map((e) => JSON.stringify(e, null, 2)).join("\n"));
    body.hidden = !open.has(head.dataset.key);
    head.setAttribute("aria-expanded", String(!body.hidden));
    head.addEventListener("click", () => {
      body.hidden = !body.hidden;
      head.setAttribute("aria-expanded", String(!body.hidden));
    });
    item.append(head, body);
    if (row.childRunId) {
      const link = el("button", "tl-open", "open its timeline");
      link.type = "button";
      link.addEventListener("click", () => showTimeline(row.childRunId, row.label));
      item.append(link);
    }
    list.append(item);
  });
}

// The timeline of `runId` (a child's when `trail` names it) into the panel.
async function showTimeline(runId, trail) {
  const list = $("journal");
  const crumb = $("timeline-trail");
  if (!runId) { list.replaceChildren(); return; }
  try {
    const data = await (await api(`/api/runs/${encodeURIComponent(runId)}/journal`)).json();
    drawTimeline(data.events, list, runId);
    crumb.replaceChildren();
    crumb.hidden = !trail;
    if (trail) {
      const back = el("button", "tl-back", "← back to the run");
      back.type = "button";
      back.addEventListener("click", () => showTimeline($("journal-run").value));
      crumb.append(el("span", null, `${trail} (run ${runId.slice(0, 8)}) `), back);
    }
  } catch (e) {
    list.replaceChildren(el("li", "muted", `no journal for this run yet: ${e.message}`));
  }
}
