"""Versioned resources with read sets, validated commits, invariants and causal retraction.

Every resource (a workspace file, a typed state key, a memory item: any string key, by
convention `file:...`, `state:...`, `memory:...`) has a version: the commit sequence number
that last wrote it (0: never written). A `Transaction` reads from the snapshot it began at,
records what it read (with versions) and buffers what it writes. `ResourceStore.commit`
is the one commit step, run without awaiting so commits are totally ordered:

- **serializable** (default): every read version must still be current (optimistic
  concurrency; a stale read is the stale-generation anomaly and is refused);
- **snapshot**: only write-write conflicts are refused (first committer wins), plus the
  declared `Invariant`s, checked on the state the commit would produce, which catches
  write skew;
- with leases, a write to a leased resource must carry its current fencing token.

A refused commit raises `CommitConflict` (or `WriteSkew`, `LeaseRefused`), a `ToolError`:
inside a tool, the model sees it and can re-read and retry. Nothing is written.

`retract(commit_id)` undoes a commit and, transitively, every commit that read a version it
produced (causal cascade). `enforce=False` turns every check off: the anomalies come back,
which is what the anomaly suite shows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

from legato.coherence._lease import LeaseTable
from legato.exceptions import CommitConflict, WriteSkew

__all__ = [
    "CommitRecord",
    "Invariant",
    "Isolation",
    "ResourceStore",
    "Transaction",
    "Versioned",
    "VersionedResources",
]

Isolation: TypeAlias = Literal["serializable", "snapshot"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Versioned:
    """A resource's value at one version."""

    key: str
    value: Any
    version: int
    """The commit sequence number that wrote this value (0: the initial value)."""
    commit_id: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Invariant:
    """A condition over some resources that every commit must keep true."""

    name: str
    keys: frozenset[str]
    check: Callable[[Mapping[str, Any]], bool]
    """Given the values of `keys` after the commit, whether the invariant holds."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CommitRecord:
    """One applied commit: what it read and what it wrote, with versions."""

    id: str
    seq: int
    author: str
    reads: Mapping[str, int]
    writes: Mapping[str, Any]
    retracted: bool = False


@runtime_checkable
class VersionedResources(Protocol):
    """What a versioned resource backend offers.

    The SQLite store and the contracts state can implement it to share the commit step.
    """

    def read(self, key: str) -> Versioned:
        """The current version of a resource."""
        ...

    def begin(self, *, author: str = "", isolation: Isolation = "serializable") -> Transaction:
        """Start a transaction at the current snapshot."""
        ...

    def commit(self, txn: Transaction) -> CommitRecord:
        """Validate and apply a transaction, or raise a conflict."""
        ...


@dataclass(kw_only=True)
class Transaction:
    """Reads from a snapshot, buffered writes; commit it with `commit()`."""

    store: ResourceStore
    snapshot: int
    author: str = ""
    isolation: Isolation = "serializable"
    reads: dict[str, int] = field(default_factory=lambda: {})
    writes: dict[str, Any] = field(default_factory=lambda: {})
    tokens: dict[str, int] = field(default_factory=lambda: {})
    """Fencing tokens presented for leased resources."""

    def read(self, key: str) -> Any:
        """The value as of the snapshot (or as written by this transaction)."""
        if key in self.writes:
            return self.writes[key]
        item = self.store.read_at(key, self.snapshot)
        self.reads.setdefault(key, item.version)
        return item.value

    def write(self, key: str, value: Any, *, token: int | None = None) -> None:
        """Buffer a write (with the fencing token of a lease on `key`, if any)."""
        self.writes[key] = value
        if token is not None:
            self.tokens[key] = token

    def commit(self) -> CommitRecord:
        """Validate and apply (see `ResourceStore.commit`)."""
        return self.store.commit(self)


class ResourceStore:
    """An in-memory versioned store with one commit sequencer (see the module docs)."""

    def __init__(
        self,
        initial: Mapping[str, Any] | None = None,
        *,
        enforce: bool = True,
        invariants: Sequence[Invariant] = (),
        leases: LeaseTable | None = None,
    ) -> None:
        self.enforce = enforce
        self.invariants = list(invariants)
        self.leases = leases
        self._seq = 0
        self._history: dict[str, list[Versioned]] = {
            k: [Versioned(key=k, value=v, version=0)] for k, v in (initial or {}).items()
        }
        self.commits: list[CommitRecord] = []

    @property
    def seq(self) -> int:
        """The number of the latest commit."""
        return self._seq

    def read(self, key: str) -> Versioned:
        """The current version of `key`."""
        return self.read_at(key, self._seq)

    def read_at(self, key: str, seq: int) -> Versioned:
        """The version of `key` visible at commit `seq`."""
        for item in reversed(self._history.get(key, ())):
            if item.version <= seq:
                return item
        return Versioned(key=key, value=None, version=0)

    def __contains__(self, key: object) -> bool:
        return key in self._history

    def values(self) -> dict[str, Any]:
        """Every resource's current value."""
        return {k: self.read(k).value for k in self._history}

    def begin(self, *, author: str = "", isolation: Isolation = "serializable") -> Transaction:
        """A transaction at the current snapshot."""
        return Transaction(store=self, snapshot=self._seq, author=author, isolation=isolation)

    def commit(self, txn: Transaction) -> CommitRecord:
        """Validate the transaction against what was committed since its snapshot, then apply.

        Raises `CommitConflict` for a stale read or a write-write conflict, `WriteSkew` for
        a broken invariant, `LeaseRefused` for a bad fencing token. With `enforce=False`
        nothing is checked (blind last-writer-wins).
        """
        if self.enforce:
            self._validate(txn)
        return self._apply(txn.author, dict(txn.reads), dict(txn.writes))

    def _validate(self, txn: Transaction) -> None:
        if txn.isolation == "serializable":
            for key, seen in txn.reads.items():
                now = self.read(key)
                if now.version != seen:
                    raise CommitConflict(key, _stale(key, seen, now, "read"))
        for key in txn.writes:
            base = self.read_at(key, txn.snapshot)
            now = self.read(key)
            if now.version != base.version:
                raise CommitConflict(key, _stale(key, base.version, now, "snapshot"))
        for inv in self.invariants:
            if inv.keys.isdisjoint(txn.writes):
                continue
            after = {k: txn.writes[k] if k in txn.writes else self.read(k).value for k in inv.keys}
            if not inv.check(after):
                key = sorted(inv.keys & set(txn.writes))[0]
                msg = (
                    f"commit refused: it would break the invariant {inv.name!r} given changes "
                    f"committed since your snapshot (write skew); read {sorted(inv.keys)} again "
                    "and decide anew"
                )
                raise WriteSkew(key, msg)
        if self.leases is not None:
            for key in txn.writes:
                self.leases.check(key, txn.tokens.get(key))

    def _apply(self, author: str, reads: dict[str, int], writes: dict[str, Any]) -> CommitRecord:
        self._seq += 1
        commit_id = f"c{self._seq}"
        for key, value in writes.items():
            self._history.setdefault(key, []).append(
                Versioned(key=key, value=value, version=self._seq, commit_id=commit_id)
            )
        record = CommitRecord(
            id=commit_id, seq=self._seq, author=author, reads=reads, writes=writes
        )
        self.commits.append(record)
        return record

    def retract(self, commit_id: str) -> list[str]:
        """Undo a commit, and (when enforcing) every commit that read what it wrote.

        Each undone write is restored to the value before it as a new version, so readers
        of the retracted value see a change. Returns the ids of the commits undone.
        """
        undone: list[str] = []
        queue = [commit_id]
        while queue:
            target = self._record(queue.pop(0))
            if target is None or target.retracted or target.id in undone:
                continue
            undone.append(target.id)
            self.commits[target.seq - 1] = CommitRecord(
                id=target.id,
                seq=target.seq,
                author=target.author,
                reads=target.reads,
                writes=target.writes,
                retracted=True,
            )
            restore = {
                key: self.read_at(key, target.seq - 1).value
                for key in target.writes
                if self.read(key).commit_id == target.id
            }
            if restore:
                self._apply(f"retract:{target.id}", {}, restore)
            if self.enforce:
                queue += [c.id for c in self._dependants(target)]
        return undone

    def _record(self, commit_id: str) -> CommitRecord | None:
        return next((c for c in self.commits if c.id == commit_id), None)

    def _dependants(self, target: CommitRecord) -> Iterable[CommitRecord]:
        produced = {(k, target.seq) for k in target.writes}
        for c in self.commits[target.seq :]:
            if not c.retracted and any((k, v) in produced for k, v in c.reads.items()):
                yield c

    def derived_from(self, commit_id: str) -> bool:
        """Whether a live value still depends, directly or transitively, on `commit_id`."""
        tainted = {commit_id}
        for c in self.commits:
            if c.retracted:
                continue
            sources = {self._writer_of(k, v) for k, v in c.reads.items()}
            if sources & tainted:
                tainted.add(c.id)
        live = {self.read(k).commit_id for k in self._history}
        return bool(live & (tainted - {commit_id})) or commit_id in live

    def _writer_of(self, key: str, version: int) -> str | None:
        return self.read_at(key, version).commit_id


def _stale(key: str, seen: int, now: Versioned, what: str) -> str:
    return (
        f"stale {'read' if what == 'read' else 'write'} of {key!r}: you worked from version "
        f"{seen}, but version {now.version} was committed since ({now.commit_id}). Nothing was "
        "written: read it again and retry."
    )
