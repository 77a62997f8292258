from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from legato import RunContext, Tool, Toolset, tool
from legato.exceptions import ToolArgumentsInvalid, ToolDefinitionError
from legato.messages import DocumentPart, ImagePart, TextPart
from legato.tools import as_tool, to_content


@tool
def alpha(x: int) -> int:
    """First."""
    return x


@tool
def beta(y: str) -> str:
    """Second."""
    return y


def ctx() -> RunContext[None]:
    return RunContext(deps=None, run_id="r")


def test_toolset_filter_and_prefix() -> None:
    ts = Toolset([alpha, beta], name="basic")
    assert [t.name for t in ts] == ["alpha", "beta"]
    assert [t.name for t in ts.filter(["beta"])] == ["beta"]
    assert [t.name for t in ts.filter(lambda t: t.name.startswith("a"))] == ["alpha"]
    prefixed = ts.prefixed("math")
    assert [t.name for t in prefixed] == ["math_alpha", "math_beta"]
    assert prefixed.name == "math_basic"
    assert "math_alpha" in prefixed and len(prefixed) == 2
    assert prefixed.get("math_beta") is not None
    with pytest.raises(ToolDefinitionError, match="gamma"):
        ts.filter(["gamma"])


def test_toolset_refuses_duplicates_and_non_tools() -> None:
    with pytest.raises(ToolDefinitionError, match="alpha"):
        Toolset([alpha, alpha])
    with pytest.raises(ToolDefinitionError):
        as_tool(42)  # type: ignore[arg-type] # deliberately wrong


def test_plain_functions_become_tools() -> None:
    def gamma(z: float) -> float:
        """Third."""
        return z

    ts = Toolset([gamma])
    assert ts.tools[0].parameters["properties"] == {"z": {"type": "number"}}


def test_invalid_tool_names_are_refused() -> None:
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        alpha.replace(name="has space")
    with pytest.raises(ToolDefinitionError, match="invalid tool name"):
        Tool.from_function(lambda: None, name="dotted.name")


def test_from_schema_checks_top_level_arguments() -> None:
    seen: list[dict[str, object]] = []

    def handler(**kwargs: object) -> str:
        seen.append(kwargs)
        return "ok"

    t = Tool.from_schema(
        name="remote",
        description="A tool described elsewhere.",
        parameters={
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
            "additionalProperties": False,
        },
        function=handler,
    )
    assert t.definition.parameters["required"] == ["q"]
    with pytest.raises(ToolArgumentsInvalid) as info:
        t.validate({"extra": 1})
    assert sorted(info.value.problems) == [
        "extra: unexpected argument",
        "q: missing required argument",
    ]
    with pytest.raises(ToolArgumentsInvalid):
        t.validate([1, 2])
    assert asyncio.run(t.invoke(t.validate({"q": "x"}), ctx())) == "ok"
    assert seen == [{"q": "x"}]
    with pytest.raises(ToolDefinitionError, match="object"):
        Tool.from_schema(
            name="bad", description="", parameters={"type": "string"}, function=handler
        )


def test_from_schema_drops_nulls_for_optional_non_nullable_properties() -> None:
    t = Tool.from_schema(
        name="opt",
        description="",
        parameters={
            "type": "object",
            "properties": {
                "q": {"type": "string"},
                "limit": {"type": "integer"},
                "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            },
            "required": ["q"],
        },
        function=dict,
    )
    assert t.validate({"q": "x", "limit": None, "note": None}) == {"q": "x", "note": None}
    with pytest.raises(ToolArgumentsInvalid) as info:
        t.validate({"q": None})  # required and not nullable: the schema decides
    assert info.value.problems == ["q: expected a string, got None"]


def test_from_schema_can_take_the_run_context() -> None:
    def handler(ctx: RunContext[None], **kwargs: object) -> str:
        return f"{ctx.run_id}:{kwargs}"

    t = Tool.from_schema(
        name="ctxful",
        description="",
        parameters={"type": "object"},
        function=handler,
    )
    assert asyncio.run(t.invoke({"a": 1}, ctx())) == "r:{'a': 1}"


def test_tool_metadata_checks() -> None:
    with pytest.raises(ToolDefinitionError, match="max_retries"):
        alpha.replace(max_retries=-1)
    with pytest.raises(ToolDefinitionError, match="timeout"):
        alpha.replace(timeout=0)
    slow = tool(side_effects="irreversible", timeout=3, max_retries=0, sequential=True)(
        alpha.function
    )
    assert (slow.side_effects, slow.timeout, slow.max_retries, slow.sequential) == (
        "irreversible",
        3,
        0,
        True,
    )


def test_same_tool_runs_concurrently_with_itself() -> None:
    @tool
    async def echo(n: int) -> int:
        """Echo after yielding."""
        await asyncio.sleep(0)
        return n

    async def many() -> list[int]:
        return list(
            await asyncio.gather(*(echo.invoke(echo.validate({"n": i}), ctx()) for i in range(100)))
        )

    assert asyncio.run(many()) == list(range(100))


class Row(BaseModel):
    id: int
    name: str


@dataclass
class Pt:
    x: int


PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 8


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", (TextPart(text="plain"),)),
        (Row(id=1, name="a"), (TextPart(text='{"id":1,"name":"a"}'),)),
        (Pt(x=2), (TextPart(text='{"x":2}'),)),
        ({"a": [1, 2]}, (TextPart(text='{"a":[1,2]}'),)),
        (None, (TextPart(text="null"),)),
        (3.5, (TextPart(text="3.5"),)),
        (PNG, (ImagePart(data=PNG, media_type="image/png"),)),
        (b"%PDF-1.7 x", (DocumentPart(data=b"%PDF-1.7 x", media_type="application/pdf"),)),
        ([TextPart(text="a"), TextPart(text="b")], (TextPart(text="a"), TextPart(text="b"))),
    ],
)
def test_return_values_become_content(value: object, expected: tuple[object, ...]) -> None:
    assert to_content(value) == expected


def test_unserializable_values_fall_back_to_str() -> None:
    class Odd:
        def __str__(self) -> str:
            return "odd!"

    assert to_content(Odd()) == (TextPart(text="odd!"),)
