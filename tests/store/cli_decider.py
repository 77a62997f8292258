"""`legato runs approve|reject ...` in a process of its own, started on a signal.

Run as `python cli_decider.py MODE ARGS...`: it loads legato, prints `ready`, waits for a
line on stdin (so that several deciders start at once), then runs the CLI with ARGS. MODE
`safe` is legato as it is; MODE `unconditional` is the twin: the stores decide a request
with a plain write, without the "still undecided" condition.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from legato.cli import main as cli_main
from legato.store import PostgresStore, SQLiteStore


def _unconditional_sqlite(self: SQLiteStore, request_id: str, decision: Any) -> bool:
    with self.db.write() as conn:
        conn.execute(
            "UPDATE approvals SET state = 'decided', decision = ?, decided_at = ? "
            "WHERE request_id = ?",
            (json.dumps(decision), time.time(), request_id),
        )
    return True


def _unconditional_postgres(self: PostgresStore, request_id: str, decision: Any) -> bool:
    with self.db.write() as conn:
        conn.execute(
            "UPDATE legato.approvals SET state = 'decided', decision = %s WHERE request_id = %s",
            (json.dumps(decision), request_id),
        )
    return True


def main() -> None:
    mode, args = sys.argv[1], sys.argv[2:]
    if mode == "unconditional":
        SQLiteStore.decide_approval = _unconditional_sqlite
        PostgresStore.decide_approval = _unconditional_postgres
    print("ready", flush=True)
    sys.stdin.readline()
    sys.argv = ["legato", *args]
    cli_main()


if __name__ == "__main__":
    main()
