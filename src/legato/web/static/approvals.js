// legato web UI: approvals: a parked call's card with Approve, Reject and Edit, the decision
// sent to the server, and edited arguments shown as sent.
"use strict";

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
