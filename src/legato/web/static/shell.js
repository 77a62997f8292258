// legato web UI: the page around the conversation: provider errors as one line, keys,
// the theme, and the drawers of narrow windows.
"use strict";

// A provider's error can be a long trace: one line (the error's kind and first line),
// the whole text behind "details".
function errorLine(code, message) {
  const text = String(message || "");
  const first = text.split("\n").find((l) => l.trim()) || "the run failed";
  const box = el("div", "msg error");
  box.setAttribute("role", "alert");
  const line = first.length > 160 ? `${first.slice(0, 157)}…` : first;
  box.append(el("div", "summary", `${code || "Error"}: ${line}`));
  if (text.trim() !== first.trim() || first.length > 160) {
    const more = el("details", "error-details");
    more.append(el("summary", null, "details"), el("pre", null, text));
    box.append(more);
  }
  return box;
}

// -- keys, theme, drawers -----------------------------------------------------------------

function typing(target) {
  return target instanceof HTMLElement && (target.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName));
}

function firstApproval() { return document.querySelector(".approval .actions"); }

function onKey(e) {
  if (e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "Escape") {
    if (!$("help").hidden) { $("help").hidden = true; return; }
    if (document.body.dataset.drawer) { closeDrawers(); return; }
    if (ui.running && !typing(e.target)) $("stop").click();
    return;
  }
  if (typing(e.target)) return;
  const box = firstApproval();
  const keys = {
    a: () => box && box.querySelector("button.approve").click(),
    r: () => box && box.parentElement.querySelector("input.reason").focus(),
    e: () => box && box.querySelector("button.edit").click(),
    "/": () => $("prompt").focus(),
    "?": () => { $("help").hidden = !$("help").hidden; },
    n: () => newThread(),
  };
  const act = keys[e.key];
  if (act) { e.preventDefault(); act(); }
}

const THEMES = ["auto", "light", "dark"];

function applyTheme(theme) {
  if (theme === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  $("theme").textContent = `Theme: ${theme}`;
  try { localStorage.setItem("legato-theme", theme); } catch (e) { /* private mode */ }
}

function closeDrawers() { delete document.body.dataset.drawer; }

function toggleDrawer(name) {
  if (document.body.dataset.drawer === name) closeDrawers();
  else document.body.dataset.drawer = name;
}

