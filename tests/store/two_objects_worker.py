"""A process that opens one SQLite file through two legato objects and commits runs.

Run as `python two_objects_worker.py DB MODE`, it speaks a line protocol on stdin/stdout:
it opens `SQLiteStore(DB)` and `SQLiteApprovalStore(DB)` (as docs/durability.md does),
commits one run, prints `ready`, waits for a line (meanwhile the test opens and closes the
file from another process), commits a second run, prints `committed`, and sleeps until it
is killed.

MODE `safe` is legato as it is. MODE `plain-open` is the twin: before opening, it reads the
file's header with a plain `open()` and closes it, as legato's old header check did; closing
that descriptor drops the process's POSIX locks on the file.

MODE `file-tool` has the agent's model read the database file with the `read` file tool of
a workspace that holds the store (the default `.legato/legato.db` under the working
directory); the workspace refuses it. MODE `file-tool-unguarded` is its twin: the refusal
is switched off, and the tool opens and closes the file.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

from legato import Agent
from legato.approvals import ApprovalPolicy, SQLiteApprovalStore
from legato.sandbox import Workspace, _workspace
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, ScriptedTurn, call, reply
from legato.tools import Tool
from legato.tools.builtin import file_tools


def main() -> None:
    db, mode = Path(sys.argv[1]), sys.argv[2]
    store = SQLiteStore(db)
    if mode == "plain-open":  # the old check: any descriptor of the file, opened and closed
        with db.open("rb") as fh:
            fh.read(16)
    approvals = SQLiteApprovalStore(db)
    turns: list[ScriptedTurn] = ["one", "two"]
    tools: list[Tool] = []
    if mode.startswith("file-tool"):
        if mode == "file-tool-unguarded":  # the twin: the workspace's refusal switched off
            _workspace._refuse_live_database = lambda st, path: None
        tools = file_tools(Workspace(db.parent))
        peek = reply(call("read_file", {"path": db.name}, id="peek"))
        turns = [peek, "one", "two"]
    agent = Agent(
        ScriptedModel(turns),
        tools=tools,
        store=store,
        approvals=ApprovalPolicy(store=approvals),
    )
    agent.run_sync("first")
    print("ready", flush=True)
    sys.stdin.readline()
    agent.run_sync("second")
    print("committed", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
