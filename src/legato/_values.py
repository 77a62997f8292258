"""`value_class`: a frozen, slotted, keyword-only dataclass, made for less at import.

`@dataclass(frozen=True, slots=True, kw_only=True)` compiles six methods per class from
generated source (`__init__`, `__repr__`, `__eq__`, `__hash__`, `__setattr__`,
`__delattr__`): a third of a millisecond per class, and legato defines about a hundred
such values on the path of its first line. `value_class` lets the dataclass machinery compile only
what depends on the fields' defaults and on frozenness (`__init__`, `__setattr__`,
`__delattr__`) and gives every class the same three plain functions for the rest, reading
the class's field names from a tuple. The class is a dataclass like any other
(`dataclasses.fields`, `replace`, `asdict`, pydantic's validation), equal, hashed and shown
exactly as the generated methods would; a method the class defines itself is kept.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from typing import Any, TypeVar, dataclass_transform, overload

__all__ = ["value_class"]

T = TypeVar("T")


@reprlib.recursive_repr()
def _repr(self: Any) -> str:
    names: tuple[str, ...] = self.__value_repr__
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in names)
    return f"{type(self).__qualname__}({shown})"


def _eq(self: Any, other: object) -> bool:
    if other.__class__ is not self.__class__:
        return NotImplemented
    for name in self.__value_compare__:
        mine, theirs = getattr(self, name), getattr(other, name)
        # as the generated method's tuple comparison: identical objects are equal
        if mine is not theirs and not mine == theirs:
            return False
    return True


def _hash(self: Any) -> int:
    return hash(tuple([getattr(self, name) for name in self.__value_hash__]))


@overload
def value_class(cls: type[T], /) -> type[T]: ...


@overload
def value_class(*, kw_only: bool = True) -> Callable[[type[T]], type[T]]: ...


@dataclass_transform(frozen_default=True, kw_only_default=True)
def value_class(cls: type[T] | None = None, /, *, kw_only: bool = True) -> Any:
    """`cls` as `@dataclass(frozen=True, slots=True, kw_only=True)`, compiled for less.

    `@value_class(kw_only=False)` is `@dataclass(frozen=True, slots=True)`.
    """
    if cls is None:

        def decorate(target: type[T]) -> type[T]:
            return _make(target, kw_only=kw_only)

        return decorate
    return _make(cls, kw_only=kw_only)


def _make(cls: type[T], *, kw_only: bool) -> type[T]:
    own = cls.__dict__
    made: Any = dataclasses.dataclass(
        frozen=True, slots=True, kw_only=kw_only, repr=False, eq=False
    )(cls)
    fields = dataclasses.fields(made)
    made.__value_repr__ = tuple(f.name for f in fields if f.repr)
    made.__value_compare__ = tuple(f.name for f in fields if f.compare)
    made.__value_hash__ = tuple(f.name for f in fields if (f.compare if f.hash is None else f.hash))
    if "__repr__" not in own:
        made.__repr__ = _repr
    if "__eq__" not in own:
        made.__eq__ = _eq
    # the dataclass rule: a hash of the fields unless the class wrote its own
    if own.get("__hash__", None) is None:
        made.__hash__ = _hash
    params = made.__dataclass_params__
    params.repr = True
    params.eq = True
    return made
