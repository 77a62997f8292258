"""What validating a raw-schema tool's arguments costs per call.

Run: `python bench/tool_validation.py [calls]`. Three schemas, as an MCP server would send
them: a typical one (five properties: string, enum, bounded integer, array, nested closed
object), a small one (one required string) and a recursive one (`$ref` to a tree node).
Each is validated through `Tool.validate` (what the run loop calls before a tool runs) on a
valid call, and on an invalid call (which also builds the model-facing error lines). Also:
the one-off cost of compiling the schema when the tool is defined, and a typed `@tool` with
the same parameters for comparison. Prints figures; asserts nothing.
"""

from __future__ import annotations

import platform
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any, Literal

from pydantic import BaseModel

from legato import Tool, tool
from legato.exceptions import ToolArgumentsInvalid
from legato.messages import JsonValue
from legato.tools._validate import (
    _compiled,  # pyright: ignore[reportPrivateUsage] - clear the cache to time a compile
)

TYPICAL: dict[str, JsonValue] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "unit": {"type": "string", "enum": ["C", "F"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 14},
        "stations": {"type": "array", "items": {"type": "string"}},
        "where": {
            "type": "object",
            "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
            "required": ["lat", "lon"],
            "additionalProperties": False,
        },
    },
    "required": ["city"],
    "additionalProperties": False,
}
SMALL: dict[str, JsonValue] = {
    "type": "object",
    "properties": {"q": {"type": "string"}},
    "required": ["q"],
}
TREE: dict[str, JsonValue] = {
    "type": "object",
    "$defs": {
        "node": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
            },
            "required": ["name"],
        }
    },
    "properties": {"tree": {"$ref": "#/$defs/node"}},
    "required": ["tree"],
}
CASES: list[tuple[str, dict[str, JsonValue], dict[str, JsonValue], dict[str, JsonValue]]] = [
    (
        "typical (5 properties)",
        TYPICAL,
        {"city": "Paris", "unit": "C", "days": 3, "stations": ["a"], "where": {"lat": 1, "lon": 2}},
        {"city": "Paris", "unit": "K", "days": "3", "extra": 1},
    ),
    ("small (1 string)", SMALL, {"q": "hello"}, {"q": 5}),
    (
        "recursive ($ref tree, depth 3)",
        TREE,
        {"tree": {"name": "a", "children": [{"name": "b", "children": [{"name": "c"}]}]}},
        {"tree": {"name": "a", "children": [{"name": 3}]}},
    ),
]


class Where(BaseModel):
    lat: float
    lon: float


@tool
def typed_weather(
    city: str,
    unit: Literal["C", "F"] = "C",
    days: int = 1,
    stations: list[str] | None = None,
    where: Where | None = None,
) -> str:
    """Typed twin of the typical schema."""
    return city


def per_call(fn: Callable[[], Any], calls: int) -> float:
    """Best-of-5 median microseconds per call."""
    rounds: list[float] = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(rounds)


def rejected(t: Tool, arguments: JsonValue) -> Callable[[], None]:
    def run() -> None:
        try:
            t.validate(arguments)
        except ToolArgumentsInvalid:
            pass

    return run


def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    print(f"python {platform.python_version()}, {calls} calls per round, median of 5 rounds")
    print(f"{'schema':34} {'valid µs':>9} {'invalid µs':>11} {'compile µs':>11}")
    for label, schema, good, bad in CASES:
        t = Tool.from_schema(name="bench", description="", parameters=schema, function=dict)
        valid = per_call(lambda t=t, good=good: t.validate(good), calls)
        invalid = per_call(rejected(t, bad), max(calls // 10, 100))

        def compile_once(schema: dict[str, JsonValue] = schema) -> None:
            _compiled.cache_clear()
            Tool.from_schema(name="bench", description="", parameters=schema, function=dict)

        compile_us = per_call(compile_once, 200)
        print(f"{label:34} {valid:9.2f} {invalid:11.2f} {compile_us:11.1f}")
    good = CASES[0][2]
    typed = per_call(lambda: typed_weather.validate(good), calls)
    print(f"{'typed @tool, same parameters':34} {typed:9.2f}")


if __name__ == "__main__":
    main()
