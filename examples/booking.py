"""An inventory/booking agent: rooms are booked and released only through verified calls.

Booking takes free rooms from a hotel's inventory and records the booking under the id the
tool returns; cancelling gives the rooms back. The contracts make overbooking impossible,
even when the model books in parallel: the second of two concurrent bookings is re-checked
against the state the first one committed.

    python examples/booking.py                      # a scripted model, offline
    python examples/booking.py openai:gpt-4.1-mini  # a real model (needs its key)
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field

from legato import Agent, RunContext, RunResult, tool
from legato.contracts import (
    Reject,
    Snapshot,
    State,
    StateOptions,
    arg,
    at_least,
    check,
    decreased_by,
    has,
    unchanged_except,
)
from legato.models import Model
from legato.testing import ScriptedModel, call, reply


class Booking(BaseModel, frozen=True):
    """One confirmed booking."""

    hotel: str
    guest: str
    rooms: int = Field(gt=0)


class Inventory(BaseModel):
    """Free rooms per hotel, and the bookings made."""

    free: dict[str, int]
    bookings: dict[str, Booking] = Field(default_factory=dict)


@dataclass(kw_only=True)
class Desk:
    """Stands for the reservation system: it hands out booking ids."""

    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    overbook: bool = False
    """Simulate a bug: take one room fewer than booked."""


def _booking_recorded(
    old: Snapshot[Inventory], new: Snapshot[Inventory], args: Mapping[str, Any], result: Any
) -> object:
    """The returned id names a new booking that matches the request."""
    booking = new["bookings"].get(result)
    if result in old["bookings"] or booking is None:
        return Reject(f"no new booking with id {result!r} was recorded")
    wanted = Booking(hotel=args["hotel"], guest=args["guest"], rooms=args["rooms"])
    return booking == wanted or Reject(f"booking {result} is {booking}, expected {wanted}")


@tool(
    requires=[
        has(("free", arg("hotel"))),
        check(lambda state, args: args["rooms"] > 0, name="at least one room"),
        at_least(("free", arg("hotel")), arg("rooms")),
    ],
    ensures=[
        decreased_by(("free", arg("hotel")), arg("rooms")),
        check(_booking_recorded, name="booking recorded", keys=["bookings"]),
        unchanged_except(("free", arg("hotel")), "bookings"),
    ],
    reads=["free", "bookings"],
    writes=["free", "bookings"],
    max_retries=3,
)
def book(ctx: RunContext[Desk], hotel: str, guest: str, rooms: int) -> str:
    """Book rooms in a hotel; returns the booking id.

    Args:
        hotel: The hotel's name.
        guest: Who the booking is for.
        rooms: How many rooms.
    """
    assert ctx.state is not None
    booking_id = f"B{next(ctx.deps.ids)}"
    free = ctx.state["free"]
    free[hotel] -= rooms - 1 if ctx.deps.overbook else rooms
    bookings = ctx.state["bookings"]
    bookings[booking_id] = Booking(hotel=hotel, guest=guest, rooms=rooms)
    return booking_id


def _booking_removed(
    old: Snapshot[Inventory], new: Snapshot[Inventory], args: Mapping[str, Any], result: Any
) -> object:
    """The booking is gone and exactly its rooms came back."""
    booking = old["bookings"][args["booking_id"]]
    if args["booking_id"] in new["bookings"]:
        return Reject("the booking is still there")
    before, after = old["free"][booking.hotel], new["free"][booking.hotel]
    return after == before + booking.rooms or Reject(
        f"free rooms at {booking.hotel} went from {before} to {after}, expected +{booking.rooms}"
    )


@tool(
    requires=has(("bookings", arg("booking_id"))),
    ensures=check(_booking_removed, name="rooms released", keys=["bookings", "free"]),
    reads=["free", "bookings"],
    writes=["free", "bookings"],
)
def cancel(ctx: RunContext[Desk], booking_id: str) -> str:
    """Cancel a booking and release its rooms.

    Args:
        booking_id: The id `book` returned.
    """
    assert ctx.state is not None
    booking = ctx.state["bookings"].pop(booking_id)  # the draft's own copy: changes count
    ctx.state["free"][booking.hotel] += booking.rooms
    return f"cancelled {booking_id}"


def make_agent(model: Model | str) -> Agent:
    """The booking agent; the model sees the free rooms in its instructions."""
    return Agent(
        model,
        tools=[book, cancel],
        instructions="You book hotel rooms. Only the tools change bookings.",
        state=State(Inventory(free={"alpine": 3, "seaside": 1})),
        state_options=StateOptions(show=("free",), max_rejections=4),
    )


def scripted_model() -> ScriptedModel:
    """A model that books, overbooks, books the last seaside room twice at once, cancels."""
    return ScriptedModel(
        [
            reply(call("book", {"hotel": "alpine", "guest": "kim", "rooms": 2})),
            reply(call("book", {"hotel": "alpine", "guest": "lee", "rooms": 5})),
            reply(
                call("book", {"hotel": "seaside", "guest": "kim", "rooms": 1}),
                call("book", {"hotel": "seaside", "guest": "lee", "rooms": 1}),
            ),
            reply(call("cancel", {"booking_id": "B1"})),
            "Booked seaside for kim; alpine for lee was full, and the alpine booking is cancelled.",
        ]
    )


def run_demo(model: Model | str | None = None, *, desk: Desk | None = None) -> RunResult:
    """Run the demo conversation and return its result."""
    agent = make_agent(model or scripted_model())
    return agent.run_sync(
        "Book 2 alpine rooms for kim, 5 for lee, one seaside room each for kim and lee, "
        "then cancel kim's alpine booking.",
        deps=desk or Desk(),
    )


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    result = run_demo(args[0] if args else None)
    print(result.output)
    assert result.state is not None
    print(f"state v{result.state.version}: {result.state.as_model()}")


if __name__ == "__main__":
    main()
