// legato web UI: conversations: the list, opening one (its messages and any run going on),
// new, rename in place, fork, delete; and sending a message (queued during a run).
"use strict";

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
