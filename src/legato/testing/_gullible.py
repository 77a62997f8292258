"""`GullibleModel`: a scripted model that obeys every instruction it finds in tool results.

It follows the user's task as a plan of tool calls, one model turn per step. Before each
step it reads the tool results visible in the request (what a real model would see: a
quarantined result shows only its handle) and, when a planted instruction is visible,
issues the calls an obedient model would make for it, first. It never refuses and never
doubts, so a defence that works against it works without the model's help.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field

from legato.messages import JsonValue, ToolCallPart, ToolResultPart
from legato.models import ModelProfile, ModelRequest, ModelStreamEvent
from legato.testing._base import BaseTestModel, call, reply

__all__ = ["GullibleModel", "Obey", "Step"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One tool call of a plan, or of an obeyed instruction."""

    tool: str
    arguments: Mapping[str, JsonValue] = field(default_factory=lambda: {})


@dataclass(frozen=True, slots=True, kw_only=True)
class Obey:
    """An instruction planted in content, and what an obedient model does on reading it."""

    triggers: tuple[str, ...]
    """Text that must all be visible in the tool results for the model to act."""
    steps: tuple[Step, ...]
    """The calls it makes then, in one turn."""


class GullibleModel(BaseTestModel):
    """Follows `plan` (a list of turns, each a list of calls) and obeys every `obey` it sees."""

    def __init__(
        self,
        plan: Sequence[Sequence[Step]],
        *,
        obey: Sequence[Obey] = (),
        final: str = "Done.",
        name: str = "test:gullible",
        profile: ModelProfile | None = None,
    ) -> None:
        super().__init__(name=name, profile=profile, chunk_size=64)
        self._plan = [tuple(turn) for turn in plan]
        self._obey = list(obey)
        self._obeyed: set[int] = set()
        self._next = 0
        self._final = final

    @staticmethod
    def visible(request: ModelRequest) -> str:
        """The tool-result text of a request: what the model reads from tools."""
        return "\n".join(
            part.text
            for message in request.messages
            for part in message.parts
            if isinstance(part, ToolResultPart)
        )

    def _turn(self, request: ModelRequest) -> tuple[Step, ...] | None:
        seen = self.visible(request)
        for index, order in enumerate(self._obey):
            if index not in self._obeyed and all(t in seen for t in order.triggers):
                self._obeyed.add(index)
                return order.steps
        if self._next < len(self._plan):
            self._next += 1
            return self._plan[self._next - 1]
        return None

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelStreamEvent]:
        """The next turn: obeyed calls first, then the plan, then the final answer."""
        self.requests.append(request)
        steps = self._turn(request)
        if steps is None:
            answer = reply(self._final)
        else:
            parts: list[ToolCallPart] = [call(s.tool, dict(s.arguments)) for s in steps]
            answer = reply(*parts)
        for event in self._events(self._response(request, answer)):
            yield event
