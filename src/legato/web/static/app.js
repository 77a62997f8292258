// legato web UI: plain JavaScript, no build step, nothing fetched from other hosts.
// The wire is AG-UI over POST + SSE (read with fetch, since EventSource cannot POST).
// Text is always set with textContent: model and tool output is never parsed as HTML.
"use strict";

const $ = (id) => document.getElementById(id);
const TERMINAL = new Set(["RUN_FINISHED", "RUN_ERROR"]);

const ui = {
  thread: null, // the open conversation's id
  gen: 0, // bumped when another conversation opens: older streams stop drawing
  runId: null, // the run of the open conversation that is going on or parked
  lastId: new Map(), // run id -> last SSE id seen (for Last-Event-ID)
  bubbles: new Map(),
  cards: new Map(),
  usage: new Map(), // run id -> its usage totals
  state: null,
  subagents: new Map(),
  runs: [],
  pending: new Map(), // approval request id -> what the server says of it
  running: false, // a run of the open conversation is going on
  queued: null, // a message typed during a run: sent when it ends
  raw: new Map(), // message id -> its Markdown text so far
  dirty: new Set(), // message ids to render on the next frame
};

function el(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined && text !== null) node.textContent = text;
  return node;
}

async function api(path, options = {}) {
  const res = await fetch(path, {
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    ...options,
  });
  if (!res.ok) {
    let body = {};
    try { body = await res.json(); } catch (e) { body = { message: res.statusText }; }
    const error = new Error(body.message || res.statusText);
    error.status = res.status;
    throw error;
  }
  return res;
}

function setStatus(text) { $("status").textContent = text; }

// Follow the newest text unless the reader scrolled up to read something older.
function scrollDown(force) {
  const m = $("messages");
  if (force || ui.stick !== false) m.scrollTop = m.scrollHeight;
}

// -- reading an SSE body ------------------------------------------------------------------

// The server sends a comment every 15 s on a quiet stream; 45 s of silence means the
// connection died half-open (a backgrounded tab, a sleeping laptop): give it up, and
// follow() picks the run up again from the last event seen.
const STALL_MS = 45000;

async function readSSE(res, gen, onFrame) {
  const reader = res.body.getReader();
  let timer = null;
  const watch = () => {
    clearTimeout(timer);
    timer = setTimeout(() => reader.cancel(), STALL_MS);
  };
  try {
    await readFrames(reader, gen, onFrame, watch);
  } finally {
    clearTimeout(timer);
  }
}

async function readFrames(reader, gen, onFrame, watch) {
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    watch();
    const { value, done } = await reader.read();
    if (done || (gen !== null && gen !== ui.gen)) break;
    buffer += decoder.decode(value, { stream: true });
    let cut;
    while ((cut = buffer.indexOf("\n\n")) >= 0) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      let id = null;
      let data = "";
      for (const line of block.split("\n")) {
        if (line.startsWith("id: ")) id = line.slice(4);
        else if (line.startsWith("data: ")) data += line.slice(6);
      }
      if (data && (gen === null || gen === ui.gen)) onFrame(id, JSON.parse(data));
    }
  }
}

// Read a run's stream to its end; if the connection drops first, pick it up again
// from the last event seen (the server keeps the run going meanwhile).
function idAfter(id, last) {
  if (!last) return true;
  const [a, b] = id.split(".").map(Number);
  const [c, d] = last.split(".").map(Number);
  return a > c || (a === c && b > d);
}

// Two streams may carry one run (this tab's request and the live notices): a frame
// already drawn is skipped by its id.
async function follow(res, gen, knownRun = null) {
  let runId = knownRun;
  let ended = false;
  const onFrame = (id, event) => {
    if (event.type === "RUN_STARTED") runId = event.runId;
    ended = TERMINAL.has(event.type);
    if (runId && id) {
      if (!idAfter(id, ui.lastId.get(runId))) return;
      ui.lastId.set(runId, id);
    }
    handle(event, runId);
  };
  for (let attempt = 0; ; attempt++) {
    try {
      await readSSE(res, gen, onFrame);
    } catch (e) { /* the connection broke: resume below */ }
    if (ended || gen !== ui.gen || !runId || attempt > 20) return;
    await new Promise((r) => setTimeout(r, Math.min(2000, 200 * (attempt + 1))));
    const last = ui.lastId.get(runId);
    try {
      res = await api(`/api/runs/${encodeURIComponent(runId)}/events`, {
        headers: last ? { "Last-Event-ID": last } : {},
      });
    } catch (e) { return; }
  }
}

async function replayRun(runId, gen) {
  const last = ui.lastId.get(runId);
  const res = await api(`/api/runs/${encodeURIComponent(runId)}/events`, {
    headers: last ? { "Last-Event-ID": last } : {},
  });
  await follow(res, gen, runId);
}

// -- drawing AG-UI events -----------------------------------------------------------------

function bubble(id, role) {
  let node = ui.bubbles.get(id);
  if (!node) {
    node = el("div", `msg ${role}`);
    node.dataset.messageId = id;
    $("messages").append(node);
    ui.bubbles.set(id, node);
  }
  return node;
}

// An assistant's text is Markdown, drawn once per frame while it streams; a person's is plain.
function setText(id, text) {
  ui.raw.set(id, text);
  ui.dirty.add(id);
  if (ui.dirty.size === 1) requestAnimationFrame(drawDirty);
}

function drawDirty() {
  for (const id of ui.dirty) {
    const node = ui.bubbles.get(id);
    if (!node) continue;
    const text = ui.raw.get(id) || "";
    if (node.classList.contains("user")) node.textContent = text;
    else node.replaceChildren(renderMarkdown(text));
  }
  ui.dirty.clear();
  scrollDown();
}

function card(callId, name) {
  let node = ui.cards.get(callId);
  if (!node) {
    node = el("div", "tool-card");
    node.dataset.toolCallId = callId;
    const head = el("div", "head");
    head.append(el("span", "name", name || "tool"), el("span", "outcome", "called"));
    node.append(head, el("pre", "args"), el("pre", "result"));
    node.querySelector(".result").hidden = true;
    $("messages").append(node);
    ui.cards.set(callId, node);
  }
  return node;
}

function setOutcome(node, outcome) {
  const badge = node.querySelector(".outcome");
  badge.textContent = outcome;
  badge.className = `outcome ${outcome.replace(/\s+/g, "-")}`;
}

function handle(event, runId) {
  const type = event.type;
  if (event.subagentRunId && (type.startsWith("TEXT_MESSAGE") || type.startsWith("TOOL_CALL"))) {
    childSays(event);
    return;
  }
  if (type === "RUN_STARTED") {
    const select = $("journal-run");
    const followLatest = !select.value || select.selectedIndex === select.options.length - 1;
    ui.runId = event.runId;
    addRunOption(event.runId);
    if (followLatest) select.value = event.runId;  // the timeline follows the newest run
    setRunning(true);
    setStatus("running");
  } else if (type === "TEXT_MESSAGE_START") {
    bubble(event.messageId, event.role || "assistant");
    setText(event.messageId, "");
  } else if (type === "TEXT_MESSAGE_CONTENT") {
    bubble(event.messageId, "assistant");
    setText(event.messageId, (ui.raw.get(event.messageId) || "") + event.delta);
  } else if (type === "TOOL_CALL_START") {
    const node = card(event.toolCallId, event.toolCallName);
    node.querySelector(".args").textContent = "";
  } else if (type === "TOOL_CALL_ARGS") {
    card(event.toolCallId).querySelector(".args").textContent += event.delta;
  } else if (type === "TOOL_CALL_END") {
    const args = card(event.toolCallId).querySelector(".args");
    try { args.textContent = JSON.stringify(JSON.parse(args.textContent), null, 2); } catch (e) { /* as sent */ }
  } else if (type === "TOOL_CALL_RESULT") {
    const result = card(event.toolCallId).querySelector(".result");
    result.hidden = false;
    result.textContent = typeof event.content === "string" ? event.content : JSON.stringify(event.content);
  } else if (type === "RUN_FINISHED") {
    finished(event);
  } else if (type === "RUN_ERROR") {
    $("messages").append(errorLine(event.code, event.message));
    setStatus("failed");
    setRunning(false);
    runEnded();
  } else if (type === "STATE_SNAPSHOT") {
    ui.state = event.snapshot;
    drawState();
  } else if (type === "STATE_DELTA") {
    applyPatch(event.delta);
  } else if (type === "SUBAGENT_STARTED" || type === "SUBAGENT_FINISHED" || type === "SUBAGENT_ERROR") {
    subagent(event);
  } else if (type === "CUSTOM") {
    custom(event, runId);
  }
  if (runId && runId === $("journal-run").value && TIMELINE_EVENTS.has(type)) refreshTimelineSoon(runId);
  scrollDown();
}

function setRunning(on) {
  ui.running = on;
  $("stop").disabled = !on;
  $("messages").setAttribute("aria-busy", String(on));
}

// A run of the open conversation ended: send the message typed meanwhile, if any.
// A run that parked waits for a decision first: the message goes back into the box.
function runEnded(parked = false) {
  const queued = ui.queued;
  ui.queued = null;
  document.querySelectorAll(".msg.queued").forEach((n) => n.remove());
  if (!queued) return;
  if (parked) {
    $("prompt").value = queued + ($("prompt").value ? `\n\n${$("prompt").value}` : "");
    showNotice("The run waits for an approval: your message is back in the box, to send when you are ready.");
  } else {
    send(queued);
  }
}

// The timeline of a run going on is drawn again as it goes (at most twice a second).
const TIMELINE_EVENTS = new Set(["RUN_STARTED", "TEXT_MESSAGE_END", "TOOL_CALL_END", "TOOL_CALL_RESULT", "SUBAGENT_STARTED", "SUBAGENT_FINISHED", "SUBAGENT_ERROR"]);
let timelineTimer = null;

function refreshTimelineSoon(runId) {
  if (timelineTimer) return;
  timelineTimer = setTimeout(() => {
    timelineTimer = null;
    if ($("journal-run").value === runId) showTimeline(runId);
  }, 500);
}

function finished(event) {
  setRunning(false);
  const outcome = event.outcome || { type: "success" };
  if (outcome.type === "interrupt") {
    setStatus("waiting for approval");
    for (const interrupt of outcome.interrupts) askApproval(interrupt);
  } else if (outcome.type === "cancelled") {
    setStatus("cancelled");
  } else {
    setStatus("done");
  }
  refreshThreads();
  if ($("journal-run").value === ui.runId || !$("journal-run").value) {
    $("journal-run").value = ui.runId;
    showTimeline(ui.runId);
  }
  runEnded(outcome.type === "interrupt");
}

function custom(event, runId) {
  const value = event.value || {};
  if (event.name === "legato.usage") {
    ui.usage.set(runId || ui.runId, value);
    drawUsage();
  } else if (event.name === "legato.tool_outcome") {
    const node = card(value.toolCallId);
    setOutcome(node, value.outcome);
    if (typeof value.duration === "number") {
      let took = node.querySelector(".took");
      if (!took) { took = el("span", "took muted"); node.querySelector(".head").append(took); }
      took.textContent = fmtSeconds(value.duration);
    }
  } else if (event.name === "legato.tool_refused") {
    const node = card(value.toolCallId);
    setOutcome(node, "refused");
    const result = node.querySelector(".result");
    result.hidden = false;
    result.textContent = value.message;
  } else if (event.name === "legato.approval_decided") {
    const node = card(callKey(value.toolCallId, event.subagentRunId));
    node.classList.remove("waiting");
    node.querySelectorAll(".approval").forEach((box) => box.remove());
    let note = node.querySelector(".decided");
    if (!note) { note = el("div", "decided"); node.append(note); }
    note.textContent = `decision: ${value.verdict}${value.message ? ` (${value.message})` : ""}`;
    if (value.verdict === "edit" && value.arguments) showEdited(node, value.arguments);
  } else if (event.name === "legato.state_committed") {
    const changes = value.changes.map((c) => `${c.key}: ${JSON.stringify(c.old)} → ${JSON.stringify(c.new)}`);
    $("state-history").prepend(el("li", null, `v${value.version} ${value.tool || "app"}: ${changes.join(", ")}`));
  } else if (event.name === "legato.state_rejected") {
    $("state-history").prepend(el("li", "rejected", `rejected (${value.stage}) ${value.tool}: ${value.message}`));
  }
}

// -- approvals ----------------------------------------------------------------------------

// A sub-agent's calls have ids of their own run: keep their cards apart from the parent's.
function callKey(callId, subagentRunId) {
  return subagentRunId ? `${subagentRunId}:${callId}` : callId;
}

function askApproval(interrupt) {
  // what the server knows of the request fills in what a replayed journal may lack
  const known = ui.pending.get(interrupt.id) || {};
  const callId = interrupt.toolCallId || known.toolCallId || interrupt.id;
  const childId = interrupt.subagentRunId || known.subagentRunId;
  const tool = known.tool || (interrupt.message || "tool").split("(")[0];
  const child = childId && ui.subagents.get(childId);
  const label = child ? `${child.querySelector(".label").textContent.split(":")[0]} › ${tool}` : tool;
  const node = card(callKey(callId, childId), label);
  const args = node.querySelector(".args");
  const asked = /^[^(]*\((.*)\) needs approval/s.exec(interrupt.message || "");
  if (!args.textContent && known.arguments !== undefined) {
    args.textContent = JSON.stringify(known.arguments, null, 2);
  } else if (!args.textContent && asked) {  // a sub-agent's call: its arguments come with the request
    try { args.textContent = JSON.stringify(JSON.parse(asked[1]), null, 2); } catch (e) { args.textContent = asked[1]; }
  }
  if (node.querySelector(`.approval[data-interrupt-id="${CSS.escape(interrupt.id)}"]`)) return;
  node.classList.add("waiting");
  setOutcome(node, "needs approval");
  const box = el("div", "approval");
  box.dataset.interruptId = interrupt.id;
  const why = el("div", "why", interrupt.message || `${tool} needs approval: ${known.rule || "the policy asks"}`);
  const actions = el("div", "actions");
  const approve = el("button", "approve", "Approve");
  const reject = el("button", "reject", "Reject");
  const edit = el("button", "edit", "Edit");
  const reason = el("input", "reason");
  reason.placeholder = "reason for a rejection (the model is told; Enter rejects)";
  const editor = el("textarea", "edited");
  editor.rows = 4;
  editor.hidden = true;
  editor.value = node.querySelector(".args").textContent;
  [approve, reject, edit].forEach((b) => { b.type = "button"; });
  approve.setAttribute("aria-keyshortcuts", "a");
  approve.title = "Approve (key: a)";
  reject.title = "Reject with the reason below (key: r to type it)";
  edit.title = "Edit the arguments (key: e)";
  edit.setAttribute("aria-keyshortcuts", "e");
  reason.setAttribute("aria-label", "Reason for a rejection");
  editor.setAttribute("aria-label", "Arguments as JSON");
  approve.addEventListener("click", () => decide(box, interrupt, { verdict: "approve" }));
  reject.addEventListener("click", () => decide(box, interrupt, {
    verdict: "reject", message: reason.value.trim() || "The user rejected this call.",
  }));
  reason.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.isComposing) { e.preventDefault(); reject.click(); }
  });
  edit.addEventListener("click", () => {
    if (editor.hidden) { editor.hidden = false; edit.textContent = "Run with these arguments"; return; }
    let args;
    try { args = JSON.parse(editor.value); } catch (e) { why.textContent = `not JSON: ${e.message}`; return; }
    decide(box, interrupt, { verdict: "edit", arguments: args });
  });
  actions.append(approve, reject, edit);
  box.append(why, actions, reason, editor);
  node.append(box);
}

// The call ran with a person's arguments: show those, the model's behind "asked for".
function showEdited(node, args) {
  const shown = node.querySelector(".args");
  if (!node.querySelector(".asked")) {
    const asked = el("details", "asked");
    asked.append(el("summary", null, "the model asked for"), el("pre", null, shown.textContent));
    shown.after(asked);
  }
  shown.textContent = JSON.stringify(args, null, 2);
  shown.classList.add("edited-args");
  node.querySelector(".head .name").dataset.edited = "edited";
}

async function decide(box, interrupt, payload) {
  box.querySelectorAll("button").forEach((b) => { b.disabled = true; });
  const gen = ui.gen;
  try {
    const res = await api("/api/agui", {
      method: "POST",
      body: JSON.stringify({
        threadId: ui.thread, runId: crypto.randomUUID(), messages: [],
        resume: [{ interruptId: interrupt.id, status: "resolved", payload }],
      }),
    });
    await follow(res, gen);
  } catch (e) {
    const why = box.querySelector(".why");
    why.classList.add("problem");
    if (e.status === 409 && /already decided/.test(e.message)) {
      // another tab (or person) decided it: the run goes on there and shows here live
      why.textContent = "Already decided elsewhere (another tab?): this card updates as the run goes on.";
      box.querySelector(".actions").remove();
      box.querySelectorAll("input, textarea").forEach((n) => n.remove());
      return;
    }
    why.textContent = `could not decide: ${e.message}`;
    box.querySelectorAll("button").forEach((b) => { b.disabled = false; });
  }
}

// -- panels -------------------------------------------------------------------------------

function drawUsage() {
  let requests = 0, input = 0, output = 0, cost = null;
  for (const u of ui.usage.values()) {
    requests += u.requests || 0;
    input += (u.total && u.total.inputTokens) || 0;
    output += (u.total && u.total.outputTokens) || 0;
    if (u.cost !== null && u.cost !== undefined) cost = (cost || 0) + u.cost;
  }
  $("usage-requests").textContent = requests;
  // a provider that reports no tokens (some local servers when streaming) shows as such, not 0
  const silent = requests > 0 && input === 0 && output === 0;
  $("usage-input").textContent = silent ? "not reported" : input;
  $("usage-output").textContent = silent ? "not reported" : output;
  $("usage-cost").textContent = cost === null ? "n/a" : `$${cost.toFixed(6)}`;
}

function drawState() {
  $("state").textContent = ui.state === null ? "(no typed state)" : JSON.stringify(ui.state, null, 2);
}

function applyPatch(ops) {
  ui.state = ui.state || {};
  for (const op of ops) {
    const key = op.path.slice(1).replace(/~1/g, "/").replace(/~0/g, "~");
    if (op.op === "remove") delete ui.state[key];
    else ui.state[key] = op.value;
  }
  drawState();
}

// A sub-agent's own text and tool calls, shown under its node of the tree.
function childSays(event) {
  const node = ui.subagents.get(event.subagentRunId);
  if (!node) return;
  const say = node.querySelector(".say");
  if (event.type === "TEXT_MESSAGE_START") say.append(el("div", "text", ""));
  else if (event.type === "TEXT_MESSAGE_CONTENT" && say.lastChild) say.lastChild.textContent += event.delta;
  else if (event.type === "TOOL_CALL_START") say.append(el("div", "call", `→ ${event.toolCallName}`));
  else if (event.type === "TOOL_CALL_RESULT") say.append(el("div", "call", `← ${String(event.content).slice(0, 200)}`));
}

function subagent(event) {
  const tree = $("subagents");
  tree.querySelectorAll(".empty").forEach((n) => n.remove());
  let node = ui.subagents.get(event.subagentRunId);
  if (!node) {
    node = el("li", null);
    const label = el("button", "label", event.name || event.subagentRunId);
    label.type = "button";
    label.title = "Show this sub-agent's timeline";
    label.addEventListener("click", () => showTimeline(event.subagentRunId, label.textContent));
    node.dataset.runId = event.subagentRunId;
    node.append(label, el("div", "say"), el("ul", null));
    const parent = event.parentSubagentRunId && ui.subagents.get(event.parentSubagentRunId);
    (parent ? parent.querySelector("ul") : tree).append(node);
    ui.subagents.set(event.subagentRunId, node);
  }
  if (event.type === "SUBAGENT_STARTED" && event.description) {
    node.querySelector(".label").textContent = `${event.name}: ${event.description}`;
  }
  if (event.type === "SUBAGENT_FINISHED") node.className = "done";
  if (event.type === "SUBAGENT_ERROR") node.className = event.code === "parked" ? "parked" : "failed";
}

function addRunOption(runId) {
  const select = $("journal-run");
  if ([...select.options].some((o) => o.value === runId)) return;
  const option = el("option", null, `run ${select.options.length + 1} (${runId.slice(0, 8)})`);
  option.value = runId;
  select.append(option);
}

// -- conversations ------------------------------------------------------------------------

async function refreshThreads() {
  const { threads } = await (await api("/api/threads")).json();
  const list = $("threads");
  list.replaceChildren();
  for (const t of threads) {
    const item = el("li", t.id === ui.thread ? "current" : null);
    item.dataset.threadId = t.id;
    const name = el("button", "name", t.id);
    name.type = "button";
    name.title = t.id;
    if (t.id === ui.thread) name.setAttribute("aria-current", "true");
    name.addEventListener("click", () => { openThread(t.id); closeDrawers(); });
    item.append(name);
    if (t.active) item.append(el("span", "live", "running"));
    if (t.pending) {
      const badge = el("span", "badge", String(t.pending));
      badge.title = `${t.pending} approval(s) waiting`;
      item.append(badge);
    }
    const tools = el("span", "row-tools");
    const rename = el("button", "rename", "Rename");
    rename.addEventListener("click", () => renameInline(item, t.id));
    const fork = el("button", "fork", "Fork");
    fork.addEventListener("click", () => forkThread(t.id));
    const remove = el("button", "delete", "Delete");
    remove.addEventListener("click", () => deleteThread(t.id));
    for (const b of [rename, fork, remove]) { b.type = "button"; b.setAttribute("aria-label", `${b.textContent} ${t.id}`); }
    tools.append(rename, fork, remove);
    item.append(tools);
    list.append(item);
  }
  return threads;
}

function resetView() {
  ui.gen += 1;
  ui.runId = null;
  ui.bubbles.clear();
  ui.cards.clear();
  ui.usage.clear();
  ui.subagents.clear();
  ui.lastId.clear();
  ui.raw.clear();
  ui.dirty.clear();
  ui.state = null;
  ui.queued = null;
  $("messages").replaceChildren();
  $("state-history").replaceChildren();
  $("journal").replaceChildren();
  $("journal-run").replaceChildren();
  $("subagents").replaceChildren(el("li", "muted empty", "none"));
  drawUsage();
  drawState();
  setStatus("idle");
  setRunning(false);
}

function showNotice(text) {
  const note = $("notice");
  note.textContent = text;
  note.hidden = !text;
}

async function openThread(id) {
  resetView();
  const gen = ui.gen;
  ui.thread = id;
  history.replaceState(null, "", `#thread=${encodeURIComponent(id)}`);
  $("thread-title").textContent = id || "New conversation";
  if (!id) { refreshThreads(); return; }
  let info;
  try {
    info = await (await api(`/api/threads/${encodeURIComponent(id)}`)).json();
  } catch (e) {
    if (gen !== ui.gen) return;
    ui.thread = null;
    $("thread-title").textContent = "New conversation";
    history.replaceState(null, "", location.pathname);
    showNotice(`Could not open "${id}": ${e.message}`);
    refreshThreads();
    return;
  }
  if (gen !== ui.gen) return;
  ui.runs = info.runs;
  ui.pending = new Map(info.pending.map((p) => [p.id, p]));
  info.runs.forEach(addRunOption);
  if (info.active) {  // a run is going on: show it at once, even before it has stored anything
    setRunning(true);
    setStatus("running");
  }
  if (!info.runs.length) {
    for (const m of info.messages) {
      if (!m.text) continue;
      const node = el("div", `msg ${m.role} history`);
      if (m.role === "user") node.textContent = m.text; else node.append(renderMarkdown(m.text));
      $("messages").append(node);
    }
  }
  refreshThreads();
  const last = info.runs[info.runs.length - 1];
  for (const runId of info.runs) {
    if (gen !== ui.gen) return;
    if (runId === last && !info.active) { $("journal-run").value = runId; showTimeline(runId); }
    await replayRun(runId, gen); // a run still going is followed live
  }
}

async function newThread() {
  closeDrawers();
  await openThread(null);
  $("prompt").focus();
}

// The name becomes a text field: Enter saves, Escape leaves it as it was.
function renameInline(item, id) {
  const name = item.querySelector(".name");
  const input = el("input", "rename-input");
  input.value = id;
  input.setAttribute("aria-label", "New name");
  input.maxLength = 100;
  name.replaceWith(input);
  input.focus();
  input.select();
  let done = false;
  const finish = async (save) => {
    if (done) return;
    done = true;
    const wanted = input.value.trim();
    if (!save || !wanted || wanted === id) { refreshThreads(); return; }
    try {
      await api(`/api/threads/${encodeURIComponent(id)}`, { method: "PATCH", body: JSON.stringify({ name: wanted }) });
    } catch (e) {
      showNotice(`Could not rename: ${e.message}`);
      refreshThreads();
      return;
    }
    showNotice("");
    if (ui.thread === id) { ui.thread = wanted; $("thread-title").textContent = wanted; history.replaceState(null, "", `#thread=${encodeURIComponent(wanted)}`); }
    refreshThreads();
  };
  input.addEventListener("keydown", (e) => {
    if (e.key === "Enter") { e.preventDefault(); finish(true); }
    else if (e.key === "Escape") { e.preventDefault(); finish(false); }
  });
  input.addEventListener("blur", () => finish(true));
}

async function forkThread(id) {
  try {
    const { id: copy } = await (await api(`/api/threads/${encodeURIComponent(id)}/fork`, { method: "POST", body: "{}" })).json();
    await refreshThreads();
    await openThread(copy);
  } catch (e) { showNotice(`Could not fork: ${e.message}`); }
}

async function deleteThread(id) {
  if (!window.confirm(`Delete the conversation "${id}"? (Run journals are kept.)`)) return;
  try {
    await api(`/api/threads/${encodeURIComponent(id)}`, { method: "DELETE" });
  } catch (e) { showNotice(`Could not delete: ${e.message}`); return; }
  if (ui.thread === id) await openThread(null);
  await refreshThreads();
}

async function send(text) {
  if (ui.running) {  // one run at a time per conversation: this one waits for it
    ui.queued = ui.queued ? `${ui.queued}\n\n${text}` : text;
    document.querySelectorAll(".msg.queued").forEach((n) => n.remove());
    const note = el("div", "msg user queued", ui.queued);
    note.append(el("div", "queued-note", "waits for the current run (Stop ends it now)"));
    $("messages").append(note);
    scrollDown(true);
    return;
  }
  showNotice("");
  if (!ui.thread) {
    try {
      const { id } = await (await api("/api/threads", { method: "POST", body: JSON.stringify({ title: text }) })).json();
      await openThread(id);
    } catch (e) { showNotice(`Could not start a conversation: ${e.message}`); return; }
  }
  const gen = ui.gen;
  setRunning(true);  // until the run's first event says so
  try {
    const res = await api("/api/agui", {
      method: "POST",
      body: JSON.stringify({
        threadId: ui.thread, runId: crypto.randomUUID(),
        messages: [{ id: crypto.randomUUID(), role: "user", content: text }],
      }),
    });
    await follow(res, gen);
  } catch (e) {
    if (gen === ui.gen) { setRunning(false); showNotice(`Not sent: ${e.message}`); $("prompt").value ||= text; }
  }
}

// -- every open tab stays current ---------------------------------------------------------

// The server's notices: a run started or ended somewhere, the list changed. The open
// conversation's runs are followed from the last event this tab has drawn.
// `connected` is called once the first stream is open: what changes after it is heard.
async function watchUpdates(connected) {
  let after = null;  // the first time: from now on (the hello says where that is)
  for (;;) {
    try {
      const res = await api(after === null ? "/api/updates" : `/api/updates?after=${after}`);
      await readSSE(res, null, (id, notice) => {
        if (id) after = Number(id);
        if (notice.type === "hello") connected(); else onNotice(notice);
      });
    } catch (e) { /* reconnect below */ }
    connected();  // never wait on a stream that fails: the page works without it
    await new Promise((r) => setTimeout(r, 1000));
  }
}

function onNotice(notice) {
  if (notice.type === "threads") {
    if (notice.renamed && notice.renamed === ui.thread) {
      ui.thread = notice.to;
      $("thread-title").textContent = notice.to;
      history.replaceState(null, "", `#thread=${encodeURIComponent(notice.to)}`);
    }
    if (notice.deleted && notice.deleted === ui.thread) { openThread(null); showNotice(`"${notice.deleted}" was deleted in another tab.`); }
    refreshThreads();
  } else if (notice.type === "run") {
    refreshThreads();
    if (notice.threadId === ui.thread && notice.active) {
      const gen = ui.gen;
      addRunOption(notice.runId);
      replayRun(notice.runId, gen).catch(() => {});
    }
  }
}

async function start() {
  let theme = "auto";
  try { theme = localStorage.getItem("legato-theme") || "auto"; } catch (e) { /* private mode */ }
  applyTheme(THEMES.includes(theme) ? theme : "auto");
  $("theme").addEventListener("click", () => {
    const now = document.documentElement.dataset.theme || "auto";
    applyTheme(THEMES[(THEMES.indexOf(now) + 1) % THEMES.length]);
  });
  const info = await (await api("/api/info")).json();
  $("model").textContent = `${info.agent} · ${info.model}`;
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = $("prompt").value.trim();
    if (!text) return;
    $("prompt").value = "";
    send(text);
  });
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing) { e.preventDefault(); $("composer").requestSubmit(); }
  });
  $("messages").addEventListener("scroll", () => {
    const m = $("messages");
    ui.stick = m.scrollHeight - m.scrollTop - m.clientHeight < 60;
  });
  $("stop").addEventListener("click", () => {
    if (ui.runId) api(`/api/runs/${encodeURIComponent(ui.runId)}/cancel`, { method: "POST" }).catch((e) => showNotice(e.message));
  });
  $("new-thread").addEventListener("click", newThread);
  $("journal-load").addEventListener("click", () => showTimeline($("journal-run").value));
  $("journal-run").addEventListener("change", () => showTimeline($("journal-run").value));
  $("show-threads").addEventListener("click", () => toggleDrawer("threads"));
  $("show-panels").addEventListener("click", () => toggleDrawer("panels"));
  $("scrim").addEventListener("click", closeDrawers);
  $("help-close").addEventListener("click", () => { $("help").hidden = true; });
  document.addEventListener("keydown", onKey);
  const threads = await refreshThreads();
  const wanted = new URLSearchParams(location.hash.slice(1)).get("thread");
  if (wanted !== null && !threads.some((t) => t.id === wanted)) {
    showNotice(`There is no conversation "${wanted}": showing the others.`);
  }
  const chosen = threads.find((t) => t.id === wanted) || threads[0];
  await new Promise((heard) => { watchUpdates(heard); });  // then nothing is missed
  document.body.dataset.ready = "true";
  if (chosen) await openThread(chosen.id); else await openThread(null);
}

start();
