"""`RunCore`: what every part of the loop shares about one run.

The parts of the loop are functions of the core, each in a module of its own:
`_plan` (what the run does next, and which part does it), `_ask` (asking the model),
`_act` (running a step's tool calls), `_close` (closing a step and the run); `_loop`'s
`RunDriver` drives them and hands the run's stream to its caller.

The core holds the run's configuration, its journal and the `RunState` projection, the
recorder (the one route of events: store, journal, stream, state, gate), the run's scope,
its effect gate and its verified state. Its only facts of its own are the tools listed for
the run and the validated output; everything else is in the state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Generic

from typing_extensions import TypeVar

from legato.contracts import StateSession
from legato.events import Journal
from legato.run._config import RunConfig
from legato.run._context import ContextStep
from legato.run._recorder import Recorder
from legato.run._scope import Scope
from legato.run._state import RunState

if TYPE_CHECKING:
    from legato.effects import EffectGate
    from legato.run._tools import ToolExecutor

__all__ = ["RunCore"]

OutputT = TypeVar("OutputT", default=str)


class RunCore(Generic[OutputT]):
    """One run's configuration, journal, state, recorder, scope, gate and verified state."""

    __slots__ = (
        "config",
        "context",
        "executor",
        "gate",
        "journal",
        "output",
        "record",
        "recorder",
        "scope",
        "session",
        "state",
    )

    def __init__(self, config: RunConfig[OutputT], journal: Journal, *, saved: int) -> None:
        """The core of a run whose past `journal` holds (`saved` of it stored already)."""
        self.config = config
        self.journal = journal
        self.state = RunState.from_events(list(journal.events))
        self.recorder = Recorder(
            journal, self.state, sink=config.store, session=config.session, saved=saved
        )
        self.record = self.recorder.record
        """Record an event: the one way into the journal and onto the stream."""
        self.output: OutputT | None = None
        """The run's validated output, once the model gave it."""
        self.session = StateSession.for_run(
            config.state,
            config.state_options,
            loaded=self.state.state_loaded,
            commits=self.state.state_commits,
        )
        """The run's verified state (None: the run has none)."""
        from legato.effects import EffectGate  # the policy layer loads with the first run

        self.scope = Scope(record=self.record, stream=self.recorder.stream)
        self.gate: EffectGate = EffectGate(
            journal=journal,
            record=self.record,
            policy=config.approvals,
            budget=config.budget,
            hooks=config.hooks,
            agent=config.agent_name,
            tree=config.parent_gate.tree if config.parent_gate is not None else None,
        )
        self.recorder.observe(self.gate.observe)
        self.gate.sole_driver = config.store is not None
        self.scope.gate = self.gate
        self.scope.store = config.store
        self.executor: ToolExecutor | None = None
        """The run's tools, once listed (`_ask.load_tools`)."""
        self.context = ContextStep(config.context, config.model, budget=config.budget)
