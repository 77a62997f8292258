// legato web UI: the transcript: AG-UI events drawn as message bubbles and tool cards, the
// run's start and end, and the custom events (state, sub-agents, parking).
"use strict";

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
