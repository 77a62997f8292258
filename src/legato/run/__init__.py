"""Running agents: the loop, its state, results, replay and the sync facade."""

from legato.run._cancel import cancel_all_runs, install_sigint_handler
from legato.run._fork import fork_journal, fork_stored
from legato.run._handle import RunHandle
from legato.run._loop import RunConfig, RunDriver
from legato.run._output import OUTPUT_TOOL, OutputMode, OutputSchema
from legato.run._recorder import JournalSink, Recorder
from legato.run._replay import replay
from legato.run._result import RunResult
from legato.run._state import RunState

__all__ = [
    "OUTPUT_TOOL",
    "OutputMode",
    "JournalSink",
    "OutputSchema",
    "Recorder",
    "RunConfig",
    "RunDriver",
    "RunHandle",
    "RunResult",
    "RunState",
    "cancel_all_runs",
    "fork_journal",
    "fork_stored",
    "install_sigint_handler",
    "replay",
]
