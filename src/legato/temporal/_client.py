"""The worker that serves legato runs, and the client helper that starts and decides them."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any, Literal

from temporalio import activity
from temporalio.client import (
    Client,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    ActivityInboundInterceptor,
    ExecuteActivityInput,
    Interceptor,
    Worker,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from legato.agent import Agent
from legato.events import JournalEvent, Parked, RunFailed, RunFinished
from legato.exceptions import (
    DecisionAlreadyUsed,
    DecisionTokenInvalid,
    DurableRunFailed,
    EngineInputInvalid,
    LegatoError,
)
from legato.store import RunStore
from legato.temporal._activities import MAX_PROMPT_BYTES, LegatoActivities
from legato.temporal._types import ActivitySettings, DecisionInput, Plan, RunInput, RunOutcome
from legato.temporal._workflow import LegatoRun

__all__ = [
    "MAX_LOCAL_RESULT_BYTES",
    "PASSED_THROUGH",
    "LocalResultLimit",
    "TemporalRuns",
    "legato_worker",
]

MAX_LOCAL_RESULT_BYTES = 1024 * 1024
"""The largest result a local activity may return (its JSON payload). Temporal records it
in a marker when the workflow task ends; over the server's limit (2 MiB) that completion
is refused, the task fails and runs the activity again, without end."""

PASSED_THROUGH = (
    "legato",  # pure code the workflow imports; re-imported per workflow it costs ~0.4 s
    "pydantic",
    "pydantic_core",
    "typing_extensions",
    "httpx",  # imported by the model clients legato loads
    "anyio",
    "sniffio",
    "openai",  # provider SDKs: heavy imports, and some touch the file system at import
    "anthropic",
    "google",
    "mcp",
    "yaml",
)
"""Modules the workflow sandbox passes through (imported once, outside the sandbox)."""


class LocalResultLimit(Interceptor):
    """Fails a local activity whose result is over `MAX_LOCAL_RESULT_BYTES`, not retried.

    A regular activity's oversized result fails that activity (`PayloadsTooLarge`, which
    the run's retry policy does not retry); a local one's would fail the workflow task
    instead, again and again. legato's plans are references, far below the limit: this is
    the bound in case one is not.
    """

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        """Check the results of the activities `next` runs."""
        return _BoundedLocalResult(next)


class _BoundedLocalResult(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        result = await super().execute_activity(input)
        if activity.info().is_local:
            payload = activity.payload_converter().to_payloads([result])[0]
            size = payload.ByteSize()
            if size > MAX_LOCAL_RESULT_BYTES:
                msg = (
                    f"the local activity {activity.info().activity_type} returned {size} "
                    f"bytes; at most {MAX_LOCAL_RESULT_BYTES} go into the workflow's history"
                )
                raise ApplicationError(msg, type="PayloadsTooLarge", non_retryable=True)
        return result


def legato_worker(
    client: Client,
    *,
    task_queue: str,
    agents: Mapping[str, Agent[Any]],
    **options: Any,
) -> Worker:
    """A Temporal worker serving runs of `agents` (each by its key) on `task_queue`.

    Registers the `LegatoRun` workflow and the activities, passes legato and the libraries
    it loads through the workflow sandbox, and fails a workflow (instead of retrying its
    task forever) on a legato error, bounds local activities' results (`LocalResultLimit`),
    and builds the event schemas its first activity would otherwise build
    (`LegatoActivities.warm`). Other `Worker` options pass through `options`. Run
    it in `async with` (or `await worker.shutdown()` in `finally`): a worker left running
    when the interpreter exits can crash it.
    """
    activities = LegatoActivities(agents)
    activities.warm()
    restrictions = SandboxRestrictions.default.with_passthrough_modules(*PASSED_THROUGH)
    interceptors = [LocalResultLimit(), *options.pop("interceptors", ())]
    return Worker(
        client,
        task_queue=task_queue,
        workflows=[LegatoRun],
        activities=activities.all(),
        workflow_runner=SandboxedWorkflowRunner(restrictions=restrictions),
        workflow_failure_exception_types=[LegatoError],
        interceptors=interceptors,
        **options,
    )


class TemporalRuns:
    """Start, watch and decide legato runs on Temporal; the workflow id is the run id."""

    def __init__(self, client: Client, *, task_queue: str) -> None:
        """Talk to Temporal through `client`; start runs on `task_queue`."""
        self.client = client
        self.task_queue = task_queue

    async def start(
        self,
        agent: str,
        prompt: str,
        *,
        run_id: str | None = None,
        settings: ActivitySettings | None = None,
        continue_every: int = 500,
    ) -> str:
        """Start a run of the agent a worker registers as `agent`; its run id.

        The prompt is the one message that travels through Temporal: one larger than
        `MAX_PROMPT_BYTES` is refused here (`EngineInputInvalid`), before anything starts.
        """
        if len(prompt.encode()) > MAX_PROMPT_BYTES:
            msg = (
                f"the prompt is {len(prompt.encode())} bytes; at most {MAX_PROMPT_BYTES} "
                "travel through Temporal (put large inputs in a file or store the tools read)"
            )
            raise EngineInputInvalid(msg)
        if continue_every < 1:
            msg = "continue_every must be at least 1"
            raise EngineInputInvalid(msg)
        run_id = run_id or uuid.uuid4().hex
        run = RunInput(
            run_id=run_id,
            agent=agent,
            prompt=prompt,
            continue_every=continue_every,
            settings=settings or ActivitySettings(),
        )
        await self.client.start_workflow(LegatoRun.run, run, id=run_id, task_queue=self.task_queue)
        return run_id

    def handle(self, run_id: str) -> WorkflowHandle[LegatoRun, RunOutcome]:
        """The run's workflow handle (for signals, cancellation, history)."""
        return self.client.get_workflow_handle_for(LegatoRun.run, run_id)

    async def result(self, run_id: str) -> RunOutcome:
        """Wait for the run's end; `DurableRunFailed` names the legato error that ended it."""
        try:
            return await self.handle(run_id).result()
        except WorkflowFailureError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError):
                raise DurableRunFailed(run_id, cause.type or "Error", cause.message) from exc
            raise DurableRunFailed(run_id, type(cause).__name__, str(cause)) from exc

    async def plan(self, run_id: str) -> Plan | None:
        """What the run does next, and where its stored journal stands."""
        return await self.handle(run_id).query("plan", result_type=Plan)

    async def open_requests(self, run_id: str) -> list[str]:
        """The approval requests the run waits on now."""
        return await self.handle(run_id).query("open_requests", result_type=list[str])

    async def decide(
        self,
        run_id: str,
        request_id: str,
        verdict: Literal["approve", "reject"],
        *,
        message: str | None = None,
    ) -> None:
        """Decide one request the run waits on (an update; exactly one decision gets in).

        `DecisionAlreadyUsed` when it was decided already; `DecisionTokenInvalid` when the
        run waits on no such request, it expired, or the run has ended.
        """
        decision = DecisionInput(request_id=request_id, verdict=verdict, message=message)
        try:
            handle = self.handle(run_id)
            # temporalio's multi-parameter overload has an untyped `args`; this is the str one
            await handle.execute_update("decide", decision, result_type=str)  # pyright: ignore[reportUnknownMemberType]
        except WorkflowUpdateFailedError as exc:
            cause = exc.cause
            if isinstance(cause, ApplicationError) and cause.type == "DecisionAlreadyUsed":
                raise DecisionAlreadyUsed(cause.message) from exc
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            raise DecisionTokenInvalid(message) from exc
        except RPCError as exc:
            if exc.status != RPCStatusCode.NOT_FOUND:
                raise
            msg = f"run {run_id} waits on no decision: {exc.message}"
            raise DecisionTokenInvalid(msg) from exc

    @staticmethod
    def events(store: RunStore, run_id: str, *, after: int = 0) -> Sequence[JournalEvent]:
        """The run's journal events after the first `after` (as the store holds them now)."""
        return list(store.load_run(run_id).events)[after:]

    async def watch(
        self, store: RunStore, run_id: str, *, after: int = 0, poll: float = 0.2
    ) -> AsyncIterator[JournalEvent]:
        """Yield the run's journal events as the store gets them, until the run ends or parks.

        The store is the run's stream: every event, in order, each once. Durable events
        arrive as their activity commits them; a parked run's stream ends with `Parked`
        (watch again after deciding).
        """
        seen = after
        while True:
            info = await asyncio.to_thread(store.run_info, run_id)
            if info is not None and info.events > seen:
                events = await asyncio.to_thread(self.events, store, run_id, after=seen)
                for event in events:
                    seen += 1
                    yield event
                    if isinstance(event, RunFinished | RunFailed | Parked):
                        return
            await asyncio.sleep(poll)
