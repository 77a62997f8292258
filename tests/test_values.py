"""`legato._values.value` behaves as `@dataclass(frozen=True, slots=True, kw_only=True)`."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest
from pydantic import TypeAdapter

from legato._values import value_class


@value_class
class Made:
    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class Generated:
    name: str
    count: int = 0
    tags: tuple[str, ...] = ()
    note: str = field(default="", repr=False, compare=False)


@value_class
class Custom:
    name: str

    def __repr__(self) -> str:
        return "mine"


def _pairs() -> list[tuple[Made, Generated]]:
    return [
        (Made(name="a"), Generated(name="a")),
        (Made(name="b", count=2, tags=("x",), note="n"), Generated(name="b", count=2, tags=("x",))),
        (Made(name="n", count=-1), Generated(name="n", count=-1)),
    ]


def test_repr_equality_and_hash_are_the_generated_ones() -> None:
    for made, generated in _pairs():
        assert repr(made).replace("Made", "Generated") == repr(generated)
        assert hash(made) == hash(generated)
        assert made == Made(**{f.name: getattr(made, f.name) for f in dataclasses.fields(made)})
    assert Made(name="a", note="x") == Made(name="a", note="y")  # compare=False is skipped
    assert Made(name="a") != Made(name="b")
    assert Made(name="a") != Generated(name="a")  # another class is never equal
    nan = float("nan")
    assert Made(name="a", tags=(str(nan),)) == Made(name="a", tags=(str(nan),))


def test_a_method_the_class_writes_is_kept() -> None:
    assert repr(Custom(name="x")) == "mine"


def test_it_is_a_frozen_slotted_keyword_only_dataclass() -> None:
    made = Made(name="a", count=1)
    assert dataclasses.is_dataclass(made)
    assert not hasattr(made, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        made.count = 2  # type: ignore[misc] # frozen: the point of the test
    with pytest.raises(TypeError):
        Made("a")  # type: ignore[misc] # keyword-only: the point of the test
    assert dataclasses.replace(made, count=3) == Made(name="a", count=3)
    assert dataclasses.asdict(made) == {"name": "a", "count": 1, "tags": (), "note": ""}
    assert pickle.loads(pickle.dumps(made)) == made
    assert copy.deepcopy(made) == made
    params: object = getattr(made, "__dataclass_params__")  # noqa: B009
    assert [getattr(params, p) for p in ("frozen", "eq", "repr")] == [True, True, True]


def test_pydantic_validates_and_dumps_it_as_the_generated_class() -> None:
    made, generated = _pairs()[1]
    dumped = TypeAdapter(Made).dump_python(made)
    assert dumped == TypeAdapter(Generated).dump_python(generated) | {"note": "n"}
    assert TypeAdapter(Made).validate_python(dumped) == made
