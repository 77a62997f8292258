// legato web UI: starting the page: theme, header, the composer's and buttons' handlers,
// the updates stream, then the conversation in the address (or the newest). Loaded last.
"use strict";

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
    // before the first view is open, a send would be wiped by it: it is sent once it is open
    if (document.body.dataset.ready !== "true") { ui.sendWhenReady = true; return; }
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
  if (chosen) await openThread(chosen.id); else await openThread(null);
  document.body.dataset.ready = "true";
  if (ui.sendWhenReady) $("composer").requestSubmit();
}

start();
