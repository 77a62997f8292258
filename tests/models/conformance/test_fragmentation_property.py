"""Property: however the wire cuts a call's arguments, every translator rebuilds them exactly."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator

import pytest
from conformance_cases import CASES, Case
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scenarios import WEATHER, call, close, make, request_for

from legato.simulator import Fault, SimCall, SimTurn, WireSimulator

STREAMING_CASES = [c for c in CASES if c.streams_arguments]


@pytest.fixture(scope="module")
def shared_sim() -> Iterator[WireSimulator]:
    with WireSimulator() as simulator:
        yield simulator


arguments = st.fixed_dictionaries(
    {"city": st.text(min_size=0, max_size=12)},
    optional={"unit": st.sampled_from(["C", "F"]), "days": st.integers(-5, 400)},
)


@pytest.mark.parametrize("case", STREAMING_CASES, ids=str)
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(args=arguments, data=st.data())
def test_any_cut_of_the_arguments_is_rebuilt_exactly(
    shared_sim: WireSimulator, case: Case, args: dict[str, object], data: st.DataObject
) -> None:
    raw = json.dumps(args, ensure_ascii=False)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(raw)), max_size=8))))
    pieces = tuple(raw[a:b] for a, b in zip([0, *cuts], [*cuts, len(raw)], strict=True))
    split = data.draw(st.sampled_from([None, 1, 2, 5]))
    shared_sim.enqueue(
        SimTurn(
            text=data.draw(st.sampled_from(["", "Looking. "])),
            calls=(SimCall(name="get_weather", chunks=pieces),),
            fault=Fault(byte_split=split),
        )
    )

    async def run() -> None:
        model = make(case, shared_sim)
        try:
            out = await call(model, request_for(tools=[WEATHER]))
        finally:
            await close(model)
        (part,) = out.response.message.tool_calls
        assert part.raw_arguments == raw
        assert part.arguments == args
        assert out.streamed_arguments()[0] == raw

    asyncio.run(run())
