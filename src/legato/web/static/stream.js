// legato web UI: the server's streams: a run's AG-UI events read from an SSE body (resumed
// with Last-Event-ID after a stall), and the notices that keep every open tab current.
"use strict";

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
