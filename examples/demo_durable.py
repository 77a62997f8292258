"""Demo section: a durable run killed and resumed by id from its SQLite journal.

A worker process runs an agent that ships two orders, writing its journal ahead to a
SQLite file. After the first shipment the worker is killed (SIGKILL, mid-run: no clean-up,
no `finally`). This process then resumes the run by its id: the first shipment is not made
again, the second is made once, and the run is stored to its end.

Run alone: `python examples/demo_durable.py`. (`--worker DB SHIPPED` is the worker.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from legato import Agent, tool
from legato.messages import ModelResponse
from legato.models import Model, ModelRequest
from legato.store import SQLiteStore
from legato.testing import FunctionModel, ScriptedModel, call, reply
from legato.tools import Tool

PROMPT = "Ship orders A1 and A2, one after the other."


def ship_tool(shipped: Path) -> Tool:
    """`ship`, recording each shipment in the file `shipped` (the outside world)."""

    @tool(side_effects="irreversible")
    def ship(order: str) -> str:
        """Ship an order.

        Args:
            order: The order id.
        """
        with shipped.open("a", encoding="utf-8") as file:
            file.write(order + "\n")
        return f"shipped {order}"

    return ship


def make_agent(model: Model, db: Path, shipped: Path) -> Agent:
    """The shipping agent, its journal written ahead to the SQLite file `db`."""
    return Agent(model, tools=[ship_tool(shipped)], store=SQLiteStore(db), name="shipper")


def worker(db: Path, shipped: Path) -> None:
    """Ship A1, then die while asking the model what to do next."""

    def model(request: ModelRequest) -> ModelResponse | str:
        if len(request.messages) == 1:
            return reply(call("ship", {"order": "A1"}))
        os.kill(os.getpid(), signal.SIGKILL)  # killed between two steps of the run
        raise AssertionError("unreachable")

    make_agent(FunctionModel(model, name="test:demo-shipper"), db, shipped).run_sync(PROMPT)


def main(workdir: Path | None = None) -> dict[str, object]:
    root = Path(workdir or tempfile.mkdtemp(prefix="legato-demo-"))
    db, shipped = root / "runs.db", root / "shipped.txt"
    worker_cmd = [sys.executable, __file__, "--worker", str(db), str(shipped)]
    code = subprocess.run(worker_cmd, check=False).returncode
    print(f"  worker exited with {code} (killed by SIGKILL: {code == -signal.SIGKILL})")
    store = SQLiteStore(db)
    (info,) = store.list_runs()
    orders = shipped.read_text(encoding="utf-8").split()
    print(
        f"  stored: run {info.run_id[:8]} status {info.status}, {info.events} events; shipped {orders}"
    )

    finish = ScriptedModel(
        [reply(call("ship", {"order": "A2"})), "Shipped A1 and A2."], name="test:demo-shipper"
    )
    result = make_agent(finish, db, shipped).resume_sync(info.run_id)
    orders = shipped.read_text(encoding="utf-8").split()
    after = store.run_info(info.run_id)
    assert after is not None
    print(f"  resumed by id: {result.output!r}; status {after.status}, {after.events} events")
    print(f"  shipped {orders} (each once)")
    return {"db": db, "run_id": info.run_id, "shipped": orders, "worker_exit": code}


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        worker(Path(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
