"""`legato runs`: list, show, approve, reject, resume and fork stored runs from a terminal."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from legato import Agent, tool
from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore
from legato.cli._app import app
from legato.events import Journal, ModelRequested, RunFinished, ToolCallAdmitted
from legato.exceptions import RunParked
from legato.store import SQLiteStore
from legato.testing import ScriptedModel, call, reply

runner = CliRunner()

AGENT_MODULE = '''
from legato import Agent, tool
from legato.approvals import ApprovalPolicy, Rule, SQLiteApprovalStore
from legato.testing import ScriptedModel

SHIPPED = []

@tool(side_effects="irreversible")
def ship(order: str) -> str:
    """Ship.

    Args:
        order: Which order.
    """
    SHIPPED.append(order)
    return "shipped " + order

def make(db):
    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=SQLiteApprovalStore(db))
    return Agent(ScriptedModel(["all shipped"]), tools=[ship], approvals=policy, name="shop")
'''


def _parked(db: Path) -> str:
    @tool(side_effects="irreversible")
    def ship(order: str) -> str:
        """Ship.

        Args:
            order: Which order.
        """
        raise AssertionError("must not run before it is approved")

    policy = ApprovalPolicy(rules=[Rule("ship", "ask")], store=SQLiteApprovalStore(db))
    agent = Agent(
        ScriptedModel([reply(call("ship", {"order": "A7"}))]),
        tools=[ship],
        approvals=policy,
        store=SQLiteStore(db),
        name="shop",
    )
    with pytest.raises(RunParked) as parked:
        agent.run_sync("ship A7")
    return parked.value.parked.run_id


_modules = iter(range(1_000_000))


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, str]:
    """A store, and the name of a module whose `agent` resumes the shop's runs."""
    name = f"shop_agent_{next(_modules)}"
    db = tmp_path / "runs.db"
    (tmp_path / f"{name}.py").write_text(AGENT_MODULE + f"\nagent = make({str(db)!r})\n")
    monkeypatch.syspath_prepend(str(tmp_path))  # pyright: ignore[reportUnknownMemberType]
    return db, name


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_a_parked_run_is_listed_shown_approved_and_resumed_from_the_terminal(
    shop: tuple[Path, str],
) -> None:
    db, module = shop
    run_id = _parked(db)
    listed = runner.invoke(app, ["runs", "list", "--store", str(db), "--json"])
    assert listed.exit_code == 0 and '"status": "parked"' in listed.output
    shown = runner.invoke(app, ["runs", "show", run_id, "--store", str(db)])
    assert shown.exit_code == 0 and "waiting:" in shown.output and "ship" in shown.output
    approved = runner.invoke(app, ["runs", "approve", run_id, "--store", str(db)])
    assert approved.exit_code == 0 and "approve:" in approved.output
    resumed = runner.invoke(
        app, ["runs", "resume", run_id, "--agent", f"{module}:agent", "--store", str(db)]
    )
    assert resumed.exit_code == 0, resumed.output
    assert "all shipped" in resumed.output
    assert importlib.import_module(module).SHIPPED == ["A7"]
    assert isinstance(SQLiteStore(db).load_run(run_id).events[-1], RunFinished)
    again = runner.invoke(app, ["runs", "approve", run_id, "--store", str(db)])
    assert again.exit_code == 1 and "nothing to decide" in again.output


def test_a_run_is_resumed_on_another_model_from_the_terminal(shop: tuple[Path, str]) -> None:
    db, module = shop
    run_id = _parked(db)
    assert runner.invoke(app, ["runs", "approve", run_id, "--store", str(db)]).exit_code == 0
    command = ["runs", "resume", run_id, "--agent", f"{module}:agent", "--store", str(db)]
    resumed = runner.invoke(app, [*command, "--model", "test:echo"])
    assert resumed.exit_code == 0, resumed.output
    assert "echo: ship A7" in resumed.output  # test:echo answered, not the agent's model
    assert importlib.import_module(module).agent.model.requests == []
    shown = runner.invoke(app, ["runs", "show", run_id, "--store", str(db)])
    assert "on test:echo" in _flat(shown.output)


def test_a_rejection_from_the_terminal_reaches_the_model(shop: tuple[Path, str]) -> None:
    db, module = shop
    run_id = _parked(db)
    rejected = runner.invoke(
        app, ["runs", "reject", run_id, "--store", str(db), "--message", "not today"]
    )
    assert rejected.exit_code == 0 and "reject:" in rejected.output
    resumed = runner.invoke(
        app, ["runs", "resume", run_id, "--agent", f"{module}:agent", "--store", str(db)]
    )
    assert resumed.exit_code == 0, resumed.output
    loaded = importlib.import_module(module)
    assert loaded.SHIPPED == []
    assert "not today" in repr(loaded.agent.model.requests[0].messages)


def test_bad_input_is_a_clear_error_and_changes_nothing(shop: tuple[Path, str]) -> None:
    db, module = shop
    run_id = _parked(db)
    before = len(SQLiteStore(db).load_run(run_id))
    for args in (
        ["runs", "approve", "no-such-thing", "--store", str(db)],
        ["runs", "show", "no-such-run", "--store", str(db)],
        ["runs", "resume", "no-such-run", "--agent", f"{module}:agent", "--store", str(db)],
        ["runs", "resume", run_id, "--agent", f"{module}:nothing", "--store", str(db)],
        ["runs", "fork", run_id, "--at", "999", "--store", str(db)],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 1, (args, result.output)
        assert "error:" in result.output or "nothing to decide" in result.output
    assert len(SQLiteStore(db).load_run(run_id)) == before


def test_fork_shares_the_prefix_and_refuses_a_point_inside_a_flight(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    shipped: list[str] = []

    @tool(side_effects="irreversible")
    def ship(order: str) -> str:
        """Ship.

        Args:
            order: Which order.
        """
        shipped.append(order)
        return "shipped"

    model = ScriptedModel([reply(call("ship", {"order": "B1"})), "first answer"])
    done = Agent(model, tools=[ship], store=SQLiteStore(db)).run_sync("ship B1")
    events = list(done.journal)
    admitted = next(i for i, e in enumerate(events, start=1) if isinstance(e, ToolCallAdmitted))
    inside = runner.invoke(
        app, ["runs", "fork", done.run_id, "--at", str(admitted), "--store", str(db)]
    )
    assert inside.exit_code == 1 and "inside the flight of ship" in _flat(inside.output)
    # after the call finished, before the model was asked for the final answer
    at = max(i for i, e in enumerate(events, start=1) if isinstance(e, ModelRequested)) - 1
    forked = runner.invoke(
        app, ["runs", "fork", done.run_id[:8], "--at", str(at), "--store", str(db), "--quiet"]
    )
    assert forked.exit_code == 0, forked.output
    new_id = forked.output.strip()
    store = SQLiteStore(db)
    copy = store.load_run(new_id)
    assert copy.events[0].forked_from == done.run_id  # type: ignore[union-attr]
    assert Journal(copy.events[1:]) == Journal(events[1:at])
    again = Agent(ScriptedModel(["second answer"]), tools=[ship], store=store)
    assert again.resume_sync(new_id).output == "second answer"
    assert shipped == ["B1"]  # nothing in the prefix ran again
