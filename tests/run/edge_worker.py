"""A worker of the edge cells of the kill matrix (tests/run/test_kill_matrix_edges.py).

It runs the kill matrix's agent (tests/run/kill_worker.py: `pay`, `put`, `read`, `send`
asked, `delegate` to a child that calls `refund`) against a SQLite file, with what users do
at the edges:

- `--two-objects`: the store and the approvals are two legato objects each opened by the
  file's path (`SQLiteStore(path)`, `SQLiteApprovalStore(path)`), as docs/durability.md
  shows, and `--peer-at=N` has another process open and close the file (as `legato runs
  list` does) after the N-th event. `--plain-open` is the twin: it opens and closes a plain
  descriptor of the file after opening the stores, as legato's old header check did.
- `--wait-decision`: `send` waits for a decision made elsewhere (the CLI, through the
  store) instead of asking a handler.

After every event it writes how many events of each run the recorder has committed
(`--saved`), so the test can tell whether a committed event was lost. Exit codes are
kill_worker's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import kill_worker

from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore
from legato.run import _recorder
from legato.store import SQLiteStore

PEER = (
    "import sqlite3, sys\n"
    "c = sqlite3.connect(sys.argv[1])\n"
    "c.execute('SELECT count(*) FROM runs').fetchone()\n"
    "c.close()\n"
)


def _track(saved_file: Path, db: str, peer_at: int) -> None:
    """Write the committed count of each run after every event; run the peer at `peer_at`."""
    original = _recorder.Recorder.record
    saved: dict[str, int] = {}
    seen = [0]

    def record(self: _recorder.Recorder, event: Any) -> Any:
        done = original(self, event)
        saved[self.state.run_id] = self.saved
        saved_file.write_text(json.dumps(saved))
        seen[0] += 1
        if seen[0] == peer_at:  # another process opens and closes the file, and is gone
            subprocess.run([sys.executable, "-c", PEER, db], check=True, timeout=60)
        return done

    _recorder.Recorder.record = record


def run_edge_worker(argv: list[str]) -> None:
    """Parse `argv`, set the edges up, then run or resume as kill_worker does."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", required=True)
    parser.add_argument("--effects", required=True)
    parser.add_argument("--mode", choices=["run", "resume"], required=True)
    parser.add_argument("--run-id-file", required=True)
    parser.add_argument("--stats", default="")
    parser.add_argument("--kill", default="")
    parser.add_argument("--saved", default="")
    parser.add_argument("--two-objects", action="store_true")
    parser.add_argument("--plain-open", action="store_true")
    parser.add_argument("--peer-at", type=int, default=0)
    parser.add_argument("--wait-decision", action="store_true")
    parsed, _ = parser.parse_known_args(argv)
    if parsed.saved:
        _track(Path(parsed.saved), parsed.store, parsed.peer_at)

    def open_stores(target: str) -> tuple[Any, Any]:
        store = SQLiteStore(target)
        if parsed.plain_open:  # the twin: a plain descriptor of the file, opened and closed
            with Path(target).open("rb") as fh:
                fh.read(16)
        approvals = SQLiteApprovalStore(target if parsed.two_objects else store)
        return store, approvals

    kill_worker.open_stores = open_stores
    if parsed.wait_decision:
        build = kill_worker.build

        def waiting(world: Any, store: Any, approvals: Any) -> Any:
            agent = build(world, store, approvals)
            agent.approvals = ApprovalPolicy(rules=[Rule("send", "ask")], store=approvals, wait=60)
            return agent

        kill_worker.build = waiting
    rest = [
        "--store", parsed.store,
        "--effects", parsed.effects,
        "--mode", parsed.mode,
        "--run-id-file", parsed.run_id_file,
    ]  # fmt: skip
    if parsed.stats:
        rest.append(f"--stats={parsed.stats}")
    if parsed.kill:
        rest.append(f"--kill={parsed.kill}")
    kill_worker.run_worker(rest)


if __name__ == "__main__":
    run_edge_worker(sys.argv[1:])
