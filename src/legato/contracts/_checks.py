"""Composable checks for the common cases: presence, equality, comparisons, exact changes.

A check names a *path*: a state key (`"user"`) or a key followed by items inside its value
(`("balances", arg("source"))`, where `arg(name)` stands for a call argument). Bounds and
amounts are constants or `arg(...)`. Each check builds a readable message for the model.
"""

from __future__ import annotations

import inspect
import operator
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeAlias, overload

from legato._values import value_class
from legato.contracts._contract import Check, Reject
from legato.contracts._state import Snapshot
from legato.exceptions import ContractViolation

__all__ = [
    "Arg",
    "arg",
    "at_least",
    "at_most",
    "check",
    "decreased_by",
    "equals",
    "greater",
    "has",
    "increased_by",
    "less",
    "unchanged_except",
]


@value_class(kw_only=False)
class Arg:
    """Stands for the value of a call argument in a check."""

    name: str


def arg(name: str) -> Arg:
    """A reference to the call argument `name`, for use inside checks.

    For example `at_least(("balances", arg("source")), arg("amount"))`.
    """
    return Arg(name)


Path: TypeAlias = str | tuple[str | Arg, ...]
Operand: TypeAlias = Any


class _Missing(Exception):
    """A path that leads nowhere (no such item)."""


def _parts(path: Path) -> tuple[str, tuple[str | Arg, ...]]:
    if isinstance(path, str):
        return path, ()
    if not path or not isinstance(path[0], str):
        msg = f"a path starts with a state key name, got {path!r}"
        raise ContractViolation(msg)
    return path[0], path[1:]


def _arg(args: Mapping[str, Any], name: str) -> Any:
    if name not in args:
        msg = f"a check refers to argument {name!r}, which the call does not have"
        raise ContractViolation(msg)
    return args[name]


def _label(path: Path, args: Mapping[str, Any]) -> str:
    key, rest = _parts(path)
    items = [key]
    for item in rest:
        items.append(str(args.get(item.name, f"<{item.name}>")) if isinstance(item, Arg) else item)
    return ".".join(items)


def _resolve(view: Snapshot[Any], path: Path, args: Mapping[str, Any]) -> Any:
    if isinstance(path, str):
        return view.raw(path)
    key, rest = path[0], path[1:]
    assert isinstance(key, str)  # checked by _parts when the check was built
    value = view.raw(key)
    for item in rest:
        name = _arg(args, item.name) if isinstance(item, Arg) else item
        try:
            value = value[name] if not hasattr(value, "model_fields") else getattr(value, name)
        except (KeyError, IndexError, TypeError, AttributeError) as exc:
            raise _Missing(_label(path, args)) from exc
    return value


def _operand(value: Operand, args: Mapping[str, Any]) -> Any:
    return _arg(args, value.name) if isinstance(value, Arg) else value


def _describe(value: Operand, args: Mapping[str, Any]) -> str:
    if isinstance(value, Arg):
        return f"argument {value.name} ({_arg(args, value.name)!r})"
    return repr(value)


def _key(path: Path) -> frozenset[str]:
    return frozenset({_parts(path)[0]})


# -- state predicates (usable before and after the call) -------------------------------------------


def _state_check(
    name: str,
    path: Path,
    test: Callable[[Any, Mapping[str, Any]], str | None],
) -> Check:
    """A check of one path; `test` returns None (pass) or what is wrong."""
    _parts(path)  # refuse a malformed path now, not at the first call

    def on(view: Snapshot[Any], args: Mapping[str, Any]) -> object:
        try:
            value = _resolve(view, path, args)
        except _Missing as missing:
            return Reject(f"{name}: {missing} does not exist")
        problem = test(value, args)
        return True if problem is None else Reject(f"{name}: {problem}")

    def after(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], _: Any) -> object:
        return on(new, args)

    return Check(name=name, pre=on, post=after, keys=_key(path))


def has(path: Path) -> Check:
    """The path exists and is not None (e.g. a logged-in user)."""
    return _state_check(
        f"has {_show(path)}",
        path,
        lambda value, args: None if value is not None else f"{_label(path, args)} is not set",
    )


def equals(path: Path, expected: Operand) -> Check:
    """The path's value equals a constant or an argument."""

    def test(value: Any, args: Mapping[str, Any]) -> str | None:
        want = _operand(expected, args)
        if value == want:
            return None
        return f"{_label(path, args)} is {value!r}, not {_describe(expected, args)}"

    return _state_check(f"{_show(path)} == {_show_operand(expected)}", path, test)


def _compare(symbol: str, op: Callable[[Any, Any], bool], path: Path, bound: Operand) -> Check:
    def test(value: Any, args: Mapping[str, Any]) -> str | None:
        limit = _operand(bound, args)
        try:
            if op(value, limit):
                return None
        except TypeError:
            pass
        return f"needs {_label(path, args)} {symbol} {_describe(bound, args)}, but it is {value!r}"

    return _state_check(f"{_show(path)} {symbol} {_show_operand(bound)}", path, test)


def at_least(path: Path, bound: Operand) -> Check:
    """The path's value is >= a constant or an argument."""
    return _compare(">=", operator.ge, path, bound)


def at_most(path: Path, bound: Operand) -> Check:
    """The path's value is <= a constant or an argument."""
    return _compare("<=", operator.le, path, bound)


def greater(path: Path, bound: Operand) -> Check:
    """The path's value is > a constant or an argument."""
    return _compare(">", operator.gt, path, bound)


def less(path: Path, bound: Operand) -> Check:
    """The path's value is < a constant or an argument."""
    return _compare("<", operator.lt, path, bound)


# -- change predicates (after the call only) ----------------------------------------------------


def _changed_by(path: Path, amount: Operand, sign: int, word: str) -> Check:
    name = f"{_show(path)} {word} by {_show_operand(amount)}"  # also checks the path

    def after(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], _: Any) -> object:
        try:
            before, now = _resolve(old, path, args), _resolve(new, path, args)
        except _Missing as missing:
            return Reject(f"{name}: {missing} does not exist")
        delta = _operand(amount, args)
        try:
            if now == before + sign * delta:
                return True
        except TypeError:
            pass
        return Reject(
            f"{name}: {_label(path, args)} went from {before!r} to {now!r}, expected "
            f"{word} by exactly {_describe(amount, args)}"
        )

    return Check(name=name, post=after, keys=_key(path))


def increased_by(path: Path, amount: Operand) -> Check:
    """After the call, the path's value is exactly the old one plus `amount`."""
    return _changed_by(path, amount, 1, "increased")


def decreased_by(path: Path, amount: Operand) -> Check:
    """After the call, the path's value is exactly the old one minus `amount`."""
    return _changed_by(path, amount, -1, "decreased")


def unchanged_except(*paths: Path) -> Check:
    """After the call, everything equals its old value except these paths."""
    name = "unchanged except " + (", ".join(_show(p) for p in paths) or "nothing")

    def after(old: Snapshot[Any], new: Snapshot[Any], args: Mapping[str, Any], _: Any) -> object:
        excluded: dict[str, list[tuple[Any, ...]]] = {}
        for path in paths:
            key, rest = _parts(path)
            excluded.setdefault(key, []).append(
                tuple(_arg(args, i.name) if isinstance(i, Arg) else i for i in rest)
            )
        # compares every key, whatever the contract reads: it only asks what the call changed
        before = old._values  # pyright: ignore[reportPrivateUsage]
        after_ = new._values  # pyright: ignore[reportPrivateUsage]
        for key in before:
            skip = excluded.get(key, [])
            if () in skip:
                continue
            where = _first_difference(before[key], after_[key], skip, key)
            if where is not None:
                return Reject(f"{name}: {where} changed")
        return True

    keys = frozenset(_parts(p)[0] for p in paths)
    return Check(name=name, post=after, keys=keys)


def _first_difference(old: Any, new: Any, skip: list[tuple[Any, ...]], where: str) -> str | None:
    """Where `old` and `new` differ outside the skipped sub-paths (None when they do not)."""
    if not skip:
        return None if old == new and type(old) is type(new) else where
    if not (isinstance(old, Mapping) and isinstance(new, Mapping)):
        return None if old == new else where
    old_map: Mapping[Any, Any] = old  # pyright: ignore[reportUnknownVariableType]
    new_map: Mapping[Any, Any] = new  # pyright: ignore[reportUnknownVariableType]
    for item in set(old_map) | set(new_map):
        inner = [s[1:] for s in skip if s and s[0] == item]
        if () in inner:
            continue
        if item not in old_map or item not in new_map:
            return f"{where}.{item}"
        found = _first_difference(old_map[item], new_map[item], inner, f"{where}.{item}")
        if found is not None:
            return found
    return None


# -- plain predicates, named -------------------------------------------------------------------


@overload
def check(
    function: Callable[[Snapshot[Any], Mapping[str, Any]], object],
    /,
    *,
    name: str | None = None,
    message: str | None = None,
    keys: Iterable[str] = (),
) -> Check: ...


@overload
def check(
    function: Callable[[Snapshot[Any], Snapshot[Any], Mapping[str, Any], Any], object],
    /,
    *,
    name: str | None = None,
    message: str | None = None,
    keys: Iterable[str] = (),
) -> Check: ...


def check(
    function: Callable[..., object],
    /,
    *,
    name: str | None = None,
    message: str | None = None,
    keys: Iterable[str] = (),
) -> Check:
    """Name a plain predicate (2 parameters: precondition; 4: postcondition).

    `message` replaces the generic rejection text when the predicate returns False; `keys`
    declares the state keys it reads, so they are checked against the schema up front.
    """
    label = name or getattr(function, "__name__", "check")
    arity = len(inspect.signature(function).parameters)
    if arity not in (2, 4):
        msg = (
            f"check {label!r}: a precondition takes (state, args), a postcondition "
            f"(old, new, args, result); this one takes {arity} parameters"
        )
        raise ContractViolation(msg)

    def decide(out: object) -> object:
        if out is False and message is not None:
            return Reject(message)
        return out

    if arity == 2:
        return Check(name=label, pre=lambda s, a: decide(function(s, a)), keys=frozenset(keys))
    return Check(
        name=label,
        post=lambda o, n, a, r: decide(function(o, n, a, r)),
        keys=frozenset(keys),
    )


def _show(path: Path) -> str:
    key, rest = _parts(path)
    return ".".join([key, *(f"<{i.name}>" if isinstance(i, Arg) else str(i) for i in rest)])


def _show_operand(value: Operand) -> str:
    return f"<{value.name}>" if isinstance(value, Arg) else repr(value)
