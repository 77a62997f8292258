// legato web UI: plain JavaScript, no build step, nothing fetched from other hosts.
// The wire is AG-UI over POST + SSE (read with fetch, since EventSource cannot POST).
// Text is always set with textContent: model and tool output is never parsed as HTML.
// The scripts share one global scope and load in order (index.html): this one first, with
// the page's state and the small helpers every other script uses; app.js last starts it.
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
