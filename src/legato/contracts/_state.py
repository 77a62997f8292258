"""The verified state: typed keys, versioned commits, immutable snapshots and drafts.

A `State` holds the current value of every declared key and the list of commits that led
there. Readers get `Snapshot`s, which never change; a tool with a contract writes a `Draft`,
which the run commits only when the contract passes; application code changes the state
with `State.commit`. Every value is validated against its key's type on the way in.
"""

from __future__ import annotations

import copy
import datetime
import decimal
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Annotated, Any, Generic, cast

from pydantic import BaseModel, TypeAdapter, ValidationError, create_model
from typing_extensions import TypeVar

from legato.events import StateChange, StateCommitted, StateLoaded
from legato.exceptions import (
    ContractViolation,
    StateError,
    StateValidationError,
    UndeclaredStateKey,
)
from legato.messages import JsonValue

if TYPE_CHECKING:
    from pydantic.fields import FieldInfo

__all__ = ["Change", "Commit", "Draft", "Snapshot", "State"]

M = TypeVar("M", bound=BaseModel, default=Any)

_ATOMIC: frozenset[type] = frozenset(
    {
        int,
        float,
        str,
        bool,
        bytes,
        type(None),
        decimal.Decimal,
        datetime.datetime,
        datetime.date,
        datetime.time,
        datetime.timedelta,
        uuid.UUID,
    }
)


def private(value: Any) -> Any:
    """A copy the caller may change freely (immutable values are returned as they are).

    Plain containers are copied by a fast path; anything else goes through `deepcopy`.
    """
    kind: type[Any] = value.__class__
    if kind in _ATOMIC:
        return value
    if kind is dict:
        return {
            k: v if type(v) in _ATOMIC else private(v)
            for k, v in cast(dict[Any, Any], value).items()
        }
    if kind is list:
        return [v if type(v) in _ATOMIC else private(v) for v in cast(list[Any], value)]
    if kind is tuple and all(type(v) in _ATOMIC for v in cast(tuple[Any, ...], value)):
        return value
    if kind is set:
        return set(cast(set[Any], value))  # members are hashable, hence treated as immutable
    if kind is frozenset:
        return value
    return copy.deepcopy(value)


# -- the schema ----------------------------------------------------------------------------------


class Schema:
    """The declared keys of a state type, with one validator per key."""

    __slots__ = ("_adapters", "keys", "model", "name")

    def __init__(self, model: type[BaseModel]) -> None:
        self.model = model
        self.name = model.__name__
        fields: dict[str, FieldInfo] = dict(model.model_fields)
        self.keys: tuple[str, ...] = tuple(fields)
        annotated: Any = Annotated
        self._adapters: dict[str, TypeAdapter[Any]] = {
            key: TypeAdapter[Any](annotated[info.annotation, info]) for key, info in fields.items()
        }

    def require(self, key: str, *, tool: str | None = None) -> None:
        """Raise `UndeclaredStateKey` unless `key` is declared."""
        if key not in self._adapters:
            raise UndeclaredStateKey(key, list(self.keys), tool=tool)

    def validate(self, key: str, value: Any, *, tool: str | None = None) -> Any:
        """The value checked strictly against the key's type (no coercion)."""
        adapter = self._adapters.get(key)
        if adapter is None:
            raise UndeclaredStateKey(key, list(self.keys), tool=tool, value=value)
        try:
            return adapter.validate_python(value, strict=True)
        except ValidationError as exc:
            raise StateValidationError(key, value, _problem(exc), tool=tool) from exc

    def to_json(self, key: str, value: Any) -> JsonValue:
        """The value in JSON form, as journals store it."""
        return cast(JsonValue, self._adapters[key].dump_python(value, mode="json"))

    def from_json(self, key: str, value: JsonValue) -> Any:
        """A journaled JSON value turned back into the key's type."""
        adapter = self._adapters.get(key)
        if adapter is None:
            raise UndeclaredStateKey(key, list(self.keys), value=value)
        try:
            return adapter.validate_python(value)
        except ValidationError as exc:
            raise StateValidationError(key, value, _problem(exc)) from exc

    def load(self, values: Mapping[str, Any] | BaseModel) -> dict[str, Any]:
        """Every key's value from a model instance or a mapping, validated."""
        if isinstance(values, BaseModel):
            if not isinstance(values, self.model):
                msg = f"expected a {self.name} instance, got {type(values).__name__}"
                raise StateError(msg)
            instance = values
        else:
            unknown = [k for k in values if k not in self._adapters]
            if unknown:
                raise UndeclaredStateKey(unknown[0], list(self.keys), value=values[unknown[0]])
            try:
                instance = self.model.model_validate(dict(values))
            except ValidationError as exc:
                error = exc.errors()[0]
                key = ".".join(str(p) for p in error["loc"]) or "?"
                raise StateValidationError(key, error.get("input"), error["msg"]) from exc
        return {key: private(getattr(instance, key)) for key in self.keys}


@cache
def schema_of(model: type[BaseModel]) -> Schema:
    """The (cached) schema of a state type."""
    return Schema(model)


def _problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


# -- snapshots and drafts --------------------------------------------------------------------------


class Snapshot(Mapping[str, Any], Generic[M]):
    """The state at one version; it never changes. Reads return private copies.

    Index it by key (`snapshot["balance"]`), or get a typed copy with `as_model()`.
    """

    __slots__ = ("_allowed", "_schema", "_seen", "_tool", "_values", "_version")

    def __init__(
        self,
        schema: Schema,
        values: Mapping[str, Any],
        version: int,
        *,
        allowed: frozenset[str] | None = None,
        tool: str | None = None,
    ) -> None:
        self._schema = schema
        self._values = values
        self._version = version
        self._allowed = allowed
        self._tool = tool
        self._seen: set[str] | None = None

    @property
    def version(self) -> int:
        """The version this snapshot shows."""
        return self._version

    def __getitem__(self, key: str) -> Any:
        return private(self.raw(key))

    def raw(self, key: str) -> Any:
        """The stored value itself, not a copy (for checks that only compare; never mutate it)."""
        if key not in self._values:
            raise UndeclaredStateKey(key, list(self._schema.keys), tool=self._tool)
        if self._allowed is not None and key not in self._allowed:
            msg = f"reads state key {key!r}, which its contract does not declare in reads="
            raise ContractViolation(msg, tool=self._tool, key=key)
        if self._seen is not None:
            self._seen.add(key)
        return self._values[key]

    def get(self, key: str, default: Any = None) -> Any:
        """The key's value (a private copy), or `default` when it is None."""
        value = self[key]
        return default if value is None else value

    def __setitem__(self, key: str, value: Any) -> None:
        msg = (
            f"cannot write state key {key!r}: this is a read-only snapshot "
            "(only a tool with a contract that declares writes= gets a writable draft)"
        )
        raise ContractViolation(msg, tool=self._tool, key=key, value=value)

    def __iter__(self) -> Iterator[str]:
        return iter(self._schema.keys)

    def __len__(self) -> int:
        return len(self._schema.keys)

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def as_model(self) -> M:
        """A typed copy of the values: an instance of the state's model."""
        values = {k: private(v) for k, v in self._values.items()}
        return cast(M, self._schema.model.model_construct(**values))

    def to_json(self, keys: Iterable[str] | None = None) -> dict[str, JsonValue]:
        """The values (or those of `keys`) in JSON form."""
        names = self._schema.keys if keys is None else tuple(keys)
        for key in names:
            self._schema.require(key, tool=self._tool)
        return {k: self._schema.to_json(k, self._values[k]) for k in names}

    def __repr__(self) -> str:
        return f"Snapshot(version={self._version}, {dict(self._values)!r})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Snapshot):
            return self._values == cast(Snapshot[Any], other)._values
        return super().__eq__(other)

    def _track(self) -> set[str]:
        self._seen = set()
        return self._seen


class Draft(Generic[M]):
    """A private, writable copy of the state for one tool call with a contract.

    Reading a key gives the draft's own copy (changes to it in place count as writes);
    assigning validates the value against the key's type and the contract's `writes`.
    Nothing reaches the state unless the run commits the draft after the postconditions.
    """

    __slots__ = ("_allowed", "_base", "_schema", "_tool", "_working", "_writes", "_written")

    def __init__(
        self,
        base: Snapshot[M],
        *,
        writes: frozenset[str],
        reads: frozenset[str] | None = None,
        tool: str | None = None,
    ) -> None:
        self._base = base
        self._schema = base._schema  # pyright: ignore[reportPrivateUsage]
        self._writes = writes
        self._allowed = None if reads is None else reads | writes
        self._tool = tool
        self._working: dict[str, Any] = {}
        self._written: set[str] = set()

    @property
    def version(self) -> int:
        """The committed version this draft started from."""
        return self._base.version

    def _check_read(self, key: str) -> None:
        self._schema.require(key, tool=self._tool)
        if self._allowed is not None and key not in self._allowed:
            msg = f"reads state key {key!r}, which its contract does not declare in reads="
            raise ContractViolation(msg, tool=self._tool, key=key)

    def __getitem__(self, key: str) -> Any:
        if key in self._working:
            return self._working[key]
        self._check_read(key)
        value = private(self._base._values[key])  # pyright: ignore[reportPrivateUsage]
        self._working[key] = value
        return value

    def get(self, key: str, default: Any = None) -> Any:
        """The key's value, or `default` when it is None."""
        value = self[key]
        return default if value is None else value

    def __setitem__(self, key: str, value: Any) -> None:
        self._schema.require(key, tool=self._tool)
        if key not in self._writes:
            msg = f"writes state key {key!r}, which its contract does not declare in writes="
            raise ContractViolation(msg, tool=self._tool, key=key, value=value)
        self._working[key] = self._schema.validate(key, value, tool=self._tool)
        self._written.add(key)

    def update(self, values: Mapping[str, Any] | None = None, /, **more: Any) -> None:
        """Assign several keys; each is validated like a single assignment."""
        for key, value in {**(values or {}), **more}.items():
            self[key] = value

    def __contains__(self, key: object) -> bool:
        return key in self._schema.keys

    def keys(self) -> tuple[str, ...]:
        """The declared keys."""
        return self._schema.keys

    def changes(self) -> dict[str, Any]:
        """The keys whose value differs from the base, validated; raises on a forbidden change."""
        base = self._base._values  # pyright: ignore[reportPrivateUsage]
        changed: dict[str, Any] = {}
        for key, value in self._working.items():
            if value == base[key] and type(value) is type(base[key]):
                continue
            if key not in self._writes:
                msg = (
                    f"changed state key {key!r} in place, which its contract does not "
                    "declare in writes="
                )
                raise ContractViolation(msg, tool=self._tool, key=key, value=value)
            if key not in self._written:  # changed in place: not validated yet
                value = self._schema.validate(key, value, tool=self._tool)
            changed[key] = value
        return changed

    def __repr__(self) -> str:
        return f"Draft(version={self.version}, working={self._working!r})"


# -- commits ---------------------------------------------------------------------------------------


class Change:
    """One key's change in a commit; `old` and `new` return private copies."""

    __slots__ = ("_json", "_new", "_old", "key")

    def __init__(
        self, key: str, old: Any, new: Any, *, json: tuple[JsonValue, JsonValue] | None = None
    ) -> None:
        self.key = key
        self._old = old
        self._new = new
        self._json = json

    @property
    def old(self) -> Any:
        """The value before the commit."""
        return private(self._old)

    @property
    def new(self) -> Any:
        """The value after the commit."""
        return private(self._new)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Change) and (self.key, self._old, self._new) == (
            other.key,
            other._old,
            other._new,
        )

    __hash__ = None  # type: ignore[assignment] # holds unhashable values

    def __repr__(self) -> str:
        return f"Change({self.key!r}, {self._old!r} -> {self._new!r})"


class Commit:
    """One version of the state: what changed, and which tool call (or `commit()`) did it."""

    __slots__ = ("call_id", "changes", "checks", "reason", "rechecked", "tool", "version")

    def __init__(
        self,
        *,
        version: int,
        changes: tuple[Change, ...],
        tool: str | None = None,
        call_id: str | None = None,
        checks: tuple[str, ...] = (),
        rechecked: bool = False,
        reason: str | None = None,
    ) -> None:
        self.version = version
        self.changes = changes
        self.tool = tool
        self.call_id = call_id
        self.checks = checks
        self.rechecked = rechecked
        self.reason = reason

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Commit):
            return NotImplemented
        return (self.version, self.changes, self.tool, self.call_id, self.checks) == (
            other.version,
            other.changes,
            other.tool,
            other.call_id,
            other.checks,
        )

    __hash__ = None  # type: ignore[assignment] # holds unhashable values

    def __repr__(self) -> str:
        who = self.tool or "application"
        keys = ", ".join(c.key for c in self.changes)
        return f"Commit(version={self.version}, by={who}, call_id={self.call_id!r}, keys=[{keys}])"


# -- the state -------------------------------------------------------------------------------------


class State(Generic[M]):
    """A typed, versioned key-value state of trusted facts.

    Declare it with a pydantic model: `State(Bank(user=None, balances={...}))`, `State(Bank)`
    (the model's defaults), `State(Bank, {"user": "ann"})`, or from typed keys with
    `State.typed(user=(str | None, None))`. The state changes only through verified tool
    calls in a run, or through `commit()`; each change is a new version.
    """

    __slots__ = ("_base", "_commits", "_json", "_schema", "_values", "_version")

    def __init__(self, initial: M | type[M], values: Mapping[str, Any] | None = None, /) -> None:
        if isinstance(initial, type):
            model = initial
            source: Mapping[str, Any] | BaseModel = values or {}
        else:
            if values is not None:
                msg = "give either a model instance, or a model type and values, not both"
                raise StateError(msg)
            model = type(initial)
            source = initial
        if not (isinstance(model, type) and issubclass(model, BaseModel)):  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = f"a state is declared by a pydantic model, got {model!r}"
            raise StateError(msg)
        self._schema = schema_of(model)
        self._values: dict[str, Any] = self._schema.load(source)
        self._json: dict[str, JsonValue] = {
            k: self._schema.to_json(k, v) for k, v in self._values.items()
        }
        self._version = 0
        self._base: tuple[int, dict[str, Any]] = (0, self._values)
        self._commits: list[Commit] = []

    @classmethod
    def typed(cls, **keys: tuple[Any, Any]) -> State[Any]:
        """A state from typed keys: `State.typed(user=(str | None, None), balance=(int, 0))`."""
        fields: dict[str, Any] = dict(keys)
        model: type[BaseModel] = create_model("State", **fields)
        return State(model)

    # -- reading -----------------------------------------------------------------------------

    @property
    def schema(self) -> type[M]:
        """The model type that declares the keys."""
        return cast(type[M], self._schema.model)

    @property
    def keys(self) -> tuple[str, ...]:
        """The declared keys, in declaration order."""
        return self._schema.keys

    @property
    def version(self) -> int:
        """The current version: 0 at the start, one more per commit."""
        return self._version

    @property
    def commits(self) -> Sequence[Commit]:
        """Every commit this state knows, oldest first."""
        return tuple(self._commits)

    def snapshot(self) -> Snapshot[M]:
        """The current state; it never changes, whatever is committed later."""
        return Snapshot(self._schema, self._values, self._version)

    def __getitem__(self, key: str) -> Any:
        return self.snapshot()[key]

    def as_model(self) -> M:
        """A typed copy of the current values."""
        return self.snapshot().as_model()

    def at(self, version: int) -> Snapshot[M]:
        """The state as it was at `version`."""
        base_version, values = self._base
        if not base_version <= version <= self._version:
            msg = (
                f"no version {version}: this state knows versions {base_version} to {self._version}"
            )
            raise StateError(msg)
        if version == self._version:
            return self.snapshot()
        current = dict(values)
        for commit in self._commits:
            if commit.version > version:
                break
            if commit.version > base_version:
                for change in commit.changes:
                    current[change.key] = change._new  # pyright: ignore[reportPrivateUsage]
        return Snapshot(self._schema, current, version)

    def diff(self, a: int, b: int) -> list[Change]:
        """The keys whose value differs between versions `a` and `b`, as `a` -> `b` changes."""
        old, new = self.at(a), self.at(b)
        return [
            Change(k, old.raw(k), new.raw(k)) for k in self._schema.keys if old.raw(k) != new.raw(k)
        ]

    def history(self, key: str) -> list[Commit]:
        """Every commit that changed `key`, oldest first, each showing only that key's change."""
        self._schema.require(key)
        found: list[Commit] = []
        for commit in self._commits:
            for change in commit.changes:
                if change.key == key:
                    found.append(
                        Commit(
                            version=commit.version,
                            changes=(change,),
                            tool=commit.tool,
                            call_id=commit.call_id,
                            checks=commit.checks,
                            rechecked=commit.rechecked,
                            reason=commit.reason,
                        )
                    )
        return found

    def changed_since(self, version: int) -> set[str]:
        """The keys some commit after `version` changed."""
        keys: set[str] = set()
        for commit in reversed(self._commits):
            if commit.version <= version:
                break
            keys.update(c.key for c in commit.changes)
        return keys

    # -- writing -----------------------------------------------------------------------------

    def commit(
        self, values: Mapping[str, Any] | None = None, /, *, reason: str | None = None, **more: Any
    ) -> Commit:
        """Change keys directly, as application code (not a tool); all or nothing.

        Each value is validated against its key's type. Returns the commit (with no changes
        and the current version when every value equals the current one).
        """
        changes = {**(values or {}), **more}
        checked = {k: self._schema.validate(k, v) for k, v in changes.items()}
        return self._apply(checked, reason=reason)

    def _apply(
        self,
        changes: Mapping[str, Any],
        *,
        tool: str | None = None,
        call_id: str | None = None,
        checks: tuple[str, ...] = (),
        rechecked: bool = False,
        reason: str | None = None,
    ) -> Commit:
        """Commit already validated values as one new version (the run's commit step).

        Private: values reach the state only through `commit` or a checked draft.
        """
        real = {k: v for k, v in changes.items() if self._values[k] != v}
        if not real:
            return Commit(version=self._version, changes=(), tool=tool, call_id=call_id)
        values = dict(self._values)
        json = dict(self._json)
        parts: list[Change] = []
        for key, value in real.items():
            stored = private(value)
            encoded = self._schema.to_json(key, stored)
            parts.append(Change(key, values[key], stored, json=(json[key], encoded)))
            values[key] = stored
            json[key] = encoded
        self._version += 1
        commit = Commit(
            version=self._version,
            changes=tuple(parts),
            tool=tool,
            call_id=call_id,
            checks=checks,
            rechecked=rechecked,
            reason=reason,
        )
        self._values, self._json = values, json
        self._commits.append(commit)
        return commit

    def fork(self) -> State[M]:
        """An independent copy with the same values and history (runs work on a fork)."""
        clone = State.__new__(State)
        clone._schema = self._schema
        clone._values = self._values
        clone._json = self._json
        clone._version = self._version
        clone._base = self._base
        clone._commits = list(self._commits)
        return cast(State[M], clone)

    # -- journal ------------------------------------------------------------------------------

    def loaded_event(self) -> StateLoaded:
        """The journal event recording this state as a run's starting point."""
        return StateLoaded(
            version=self._version, values=dict(self._json), schema_name=self._schema.name
        )

    def commit_event(self, commit: Commit) -> StateCommitted:
        """The journal event for one of this state's commits."""
        schema = self._schema
        return StateCommitted(
            version=commit.version,
            changes=tuple(_journal_change(schema, c) for c in commit.changes),
            tool=commit.tool,
            call_id=commit.call_id,
            checks=commit.checks,
            rechecked=commit.rechecked,
        )

    @classmethod
    def from_journal(
        cls,
        loaded: StateLoaded,
        commits: Sequence[StateCommitted],
        schema: type[M] | None = None,
    ) -> State[M]:
        """Rebuild a state from its journal events; without `schema`, every key is typed `Any`."""
        model = schema or _untyped(loaded.schema_name, tuple(loaded.values))
        state = cast(State[M], cls.__new__(cls))
        state._schema = schema_of(model)
        decoded = {k: state._schema.from_json(k, v) for k, v in loaded.values.items()}
        state._values = state._schema.load(decoded)
        state._json = {k: state._schema.to_json(k, v) for k, v in state._values.items()}
        state._version = loaded.version
        state._base = (loaded.version, state._values)
        state._commits = []
        for event in commits:
            if event.version != state._version + 1:
                msg = f"state commit {event.version} does not follow version {state._version}"
                raise StateError(msg)
            for change in event.changes:
                state._schema.require(change.key)
            state._apply(
                {c.key: state._schema.from_json(c.key, c.new) for c in event.changes},
                tool=event.tool,
                call_id=event.call_id,
                checks=event.checks,
                rechecked=event.rechecked,
            )
        return state

    def __repr__(self) -> str:
        return f"State[{self._schema.name}](version={self._version}, {self._values!r})"


def _journal_change(schema: Schema, change: Change) -> StateChange:
    encoded = change._json  # pyright: ignore[reportPrivateUsage]
    if encoded is None:
        encoded = (
            schema.to_json(change.key, change._old),  # pyright: ignore[reportPrivateUsage]
            schema.to_json(change.key, change._new),  # pyright: ignore[reportPrivateUsage]
        )
    return StateChange(key=change.key, old=encoded[0], new=encoded[1])


@cache
def _untyped(name: str, keys: tuple[str, ...]) -> type[BaseModel]:
    fields: dict[str, Any] = dict.fromkeys(keys, (Any, None))
    return create_model(name, **fields)
