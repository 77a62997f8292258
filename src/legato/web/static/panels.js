// legato web UI: the side panels: usage and cost, the typed state, the sub-agent tree's data
// and the list of runs the timeline can show.
"use strict";

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
