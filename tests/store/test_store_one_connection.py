"""One connection per database file per process: committed runs survive another process.

A process that opens one file through two legato objects (`SQLiteStore` and
`SQLiteApprovalStore`) commits a run while another process opens and closes the file (the
CLI's `legato runs list`), and is killed with SIGKILL: every committed run must be in the
file. The twin closes a plain descriptor of the file in the worker (what legato's header
check used to do): that drops the process's POSIX locks, the other process deletes the
write-ahead log under it, and the second run is lost.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from legato.events import ToolCallFinished
from legato.exceptions import StoreCorrupted, StoreLocked
from legato.memory import SQLiteMemory
from legato.store import Database, SQLiteStore, open_connections

WORKER = Path(__file__).with_name("two_objects_worker.py")
SRC = Path(__file__).resolve().parents[2] / "src"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def _runs_in(db: Path) -> int:
    """Committed runs, read with plain SQLite in this process after the worker died."""
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
    finally:
        conn.close()


def _cli_runs_list(db: Path) -> str:
    """`legato runs list --store DB --json` in a process of its own: it opens and closes."""
    done = subprocess.run(
        [sys.executable, "-c", "from legato.cli import main; main()", "runs", "list"]
        + ["--store", str(db), "--json"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _deleted_wal(pid: int) -> bool:
    """Whether the process holds a `-wal` file that was deleted (it writes into nothing)."""
    fds = Path(f"/proc/{pid}/fd")
    for fd in fds.iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if "-wal" in target and target.endswith("(deleted)"):
            return True
    return False


def _kill_after_second_run(db: Path, mode: str) -> tuple[int, int, bool]:
    """(runs seen by another process before the kill, runs in the file after it, wal gone)."""
    worker = subprocess.Popen(
        [sys.executable, str(WORKER), str(db), mode],
        env=_env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert worker.stdin is not None and worker.stdout is not None
    try:
        assert worker.stdout.readline().strip() == "ready"
        assert len(_cli_runs_list(db).splitlines()) == 1  # another process opens and closes
        worker.stdin.write("go\n")
        worker.stdin.flush()
        assert worker.stdout.readline().strip() == "committed"
        seen = len(_cli_runs_list(db).splitlines())
        wal_gone = _deleted_wal(worker.pid)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait(timeout=60)
        worker.stdin.close()
        worker.stdout.close()
    return seen, _runs_in(db), wal_gone


def test_two_objects_on_one_file_lose_no_committed_run_when_killed(tmp_path: Path) -> None:
    seen, stored, wal_gone = _kill_after_second_run(tmp_path / "runs.db", "safe")
    print(f"\nsafe: seen by another process {seen}, stored after SIGKILL {stored}")
    assert (seen, stored, wal_gone) == (2, 2, False)


def test_twin_a_closed_plain_descriptor_loses_the_committed_run(tmp_path: Path) -> None:
    seen, stored, wal_gone = _kill_after_second_run(tmp_path / "runs.db", "plain-open")
    print(f"\ntwin (plain open+close): seen {seen}, stored after SIGKILL {stored}")
    assert (seen, stored, wal_gone) == (1, 1, True)


def test_a_file_tool_reading_the_store_is_refused_and_no_run_is_lost(tmp_path: Path) -> None:
    seen, stored, wal_gone = _kill_after_second_run(tmp_path / "runs.db", "file-tool")
    print(f"\nfile tool, guarded: seen {seen}, stored after SIGKILL {stored}")
    assert (seen, stored, wal_gone) == (2, 2, False)
    store = SQLiteStore(tmp_path / "runs.db")
    first = store.list_runs()[-1]
    results = [e for e in store.load_run(first.run_id) if isinstance(e, ToolCallFinished)]
    assert len(results) == 1 and "database file" in results[0].result.text  # refused
    store.close()


def test_twin_a_file_tool_reading_the_store_loses_the_committed_run(tmp_path: Path) -> None:
    seen, stored, wal_gone = _kill_after_second_run(tmp_path / "runs.db", "file-tool-unguarded")
    print(f"\ntwin (file tool unguarded): seen {seen}, stored after SIGKILL {stored}")
    assert (seen, stored, wal_gone) == (1, 1, True)


def test_the_workspace_refuses_a_live_database_and_its_companions(tmp_path: Path) -> None:
    from legato.exceptions import SandboxViolation
    from legato.sandbox import Workspace

    db = tmp_path / ".legato" / "legato.db"
    store = SQLiteStore(db)
    store.append_turn("s", [], run_id=None)
    ws = Workspace(tmp_path)
    for name in ("legato.db", "legato.db-wal", "legato.db-shm"):
        with pytest.raises(SandboxViolation, match="database file"):
            ws.read_bytes(f".legato/{name}")
    with pytest.raises(SandboxViolation, match="database file"):
        ws.write_bytes(".legato/legato.db", b"gone")
    ws.write_bytes("notes.txt", b"fine")  # other files are as before
    assert ws.read_bytes("notes.txt") == b"fine"
    store.close()
    assert ws.read_bytes(".legato/legato.db").startswith(b"SQLite format 3")  # closed: a file


# -- one connection per file per process ---------------------------------------------------------


def test_every_legato_object_on_a_file_shares_one_connection(tmp_path: Path) -> None:
    from legato.approvals import SQLiteApprovalStore

    db = tmp_path / "legato.db"
    store = SQLiteStore(db)
    approvals = SQLiteApprovalStore(db)
    memory = SQLiteMemory(db)
    link = tmp_path / "link.db"
    link.symlink_to(db)
    other_spelling = SQLiteStore(tmp_path / "." / "link.db")
    assert approvals.store.db.shares_connection_with(store.db)
    assert memory.db.shares_connection_with(store.db)
    assert other_spelling.db.shares_connection_with(store.db)
    assert open_connections()[str(db)] == 4
    memory.remember("Ada likes tea.")
    assert store.list_runs() == []
    for obj in (approvals.store, memory, other_spelling):
        obj.close()
    assert open_connections()[str(db)] == 1
    store.close()
    assert str(db) not in open_connections()
    assert Database(db).version > 0  # reopens after the last close


def test_a_handle_collected_without_close_releases_its_share(tmp_path: Path) -> None:
    import gc

    db = tmp_path / "legato.db"
    kept = SQLiteStore(db)
    SQLiteStore(db).list_runs()
    gc.collect()
    assert open_connections()[str(db)] == 1
    kept.close()


def test_threads_opening_one_file_at_once_get_one_connection(tmp_path: Path) -> None:
    db = tmp_path / "legato.db"
    opened: list[Database] = []
    barrier = threading.Barrier(8)

    def open_one() -> None:
        barrier.wait()
        opened.append(Database(db))

    threads = [threading.Thread(target=open_one) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(d.shares_connection_with(opened[0]) for d in opened)
    assert open_connections()[str(db)] == 8
    for d in opened:
        d.close()


# -- bad files: a typed error, nothing written ---------------------------------------------------


def test_a_file_that_is_not_sqlite_is_refused_through_sqlite_untouched(tmp_path: Path) -> None:
    db = tmp_path / "notes.db"
    db.write_bytes(b"hello")  # shorter than a SQLite header
    with pytest.raises(StoreCorrupted, match="not a SQLite database"):
        SQLiteStore(db)
    assert db.read_bytes() == b"hello"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.db"]  # no -wal, no -shm


def test_a_foreign_sqlite_file_is_not_switched_to_wal(tmp_path: Path) -> None:
    db = tmp_path / "other.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE invoices(id INTEGER)")
    conn.commit()
    conn.close()
    before = db.read_bytes()
    with pytest.raises(StoreCorrupted, match="another program"):
        SQLiteStore(db)
    assert db.read_bytes() == before  # not even its journal mode changed
    assert sqlite3.connect(db).execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreCorrupted, match="directory"):
        SQLiteStore(tmp_path)


def test_a_file_locked_by_another_program_is_a_typed_error_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    db = tmp_path / "legato.db"
    SQLiteStore(db).close()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('PRAGMA locking_mode=EXCLUSIVE')\n"
            "c.execute('BEGIN EXCLUSIVE')\n"
            "c.execute('SELECT count(*) FROM runs').fetchone()\n"
            "print('locked', flush=True)\n"
            "sys.stdin.readline()\n",
            str(db),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdin is not None
    try:
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreLocked, match="locked"):
            SQLiteStore(db, timeout=0.2).list_runs()
    finally:
        holder.stdin.write("\n")
        holder.stdin.close()
        holder.wait(timeout=60)
        holder.stdout.close()
    assert _runs_in(db) == 0


# -- nothing in legato opens a database file outside SQLite --------------------------------------

_watched: list[str] = []
_opened: list[str] = []


def _audit(event: str, args: tuple[object, ...]) -> None:
    if event == "open" and _watched and args and isinstance(args[0], str | Path):
        name = str(args[0])
        if any(name.startswith(w) for w in _watched):
            _opened.append(name)


_hooked: list[bool] = []


def test_no_legato_door_opens_the_database_file_outside_sqlite(tmp_path: Path) -> None:
    """An audit hook sees every Python-level open; SQLite's own opens are in C, unseen."""
    from typer.testing import CliRunner

    from legato.approvals import SQLiteApprovalStore
    from legato.cli._app import app

    if not _hooked:
        sys.addaudithook(_audit)
        _hooked.append(True)
    db = tmp_path / "legato.db"
    _watched.append(str(db))
    try:
        store = SQLiteStore(db)
        SQLiteApprovalStore(db)
        SQLiteMemory(db).remember("Ada likes tea.")
        runner = CliRunner()
        for args in (["runs", "list"], ["runs", "show", "nope"], ["runs", "approve", "nope"]):
            runner.invoke(app, [*args, "--store", str(db)])
        store.close()
        # the probe works: a plain open of the file is seen
        with db.open("rb"):
            pass
        assert _opened == [str(db)]
    finally:
        _watched.clear()
        _opened.clear()
