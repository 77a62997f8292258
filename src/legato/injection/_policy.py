"""One-line policies for sinks whose values come from data, and the checks they get.

Each policy says, structurally, which values from tool results may reach a sink; none
reads the content's wording. They are the patterns that let data-derived values through
without a person (research: injection-defence.md §8):

- `Trust(tool, fields, where=...)`: trust by author, per record. The named fields of the
  records a tool returns are trusted, optionally only in records whose `where` fields
  hold the given values: the payees of the user's own payments
  (`Trust("get_most_recent_transactions", ("recipient",), where={"sender": "me"})`),
  the user's address book (`Trust("search_contacts_by_name", ("email",))`), the platform's
  own directory (`Trust("get_channels")`). A field holding free text someone else wrote
  (a subject, a body) must not be named: its words stay untrusted.
- `Endorse(values)`: a datum endorsed once (the user's own address, an account the user
  names in the configuration) instead of an approval per call.
- `Secret(tool, fields, readers=...)`: a secrecy label, the one policy that takes trust
  away. The named fields of the records `tool` returns (a passport number, a card number)
  are secret: a side-effecting call that carries one in any argument is asked (rule
  `secret`), whoever its recipient is, unless every recipient is one of `readers`. It
  covers what a sink cannot: a secret sent in a message body to a recipient the user
  chose, because an injection asked for it.

A value a policy vouches for is indexed as trusted under the policy's own source
(`policy: <the line>`), so the decision that admits it names the policy, and a block
names the untrusted source instead. Policies only ever add trust to named fields of
named tools; they never widen the grant, and results can only narrow it.

A policy naming a tool the agent does not have, or with an empty field name, is a
`PolicyError` when the defence is made: never a silently open sink.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from typing import cast

from legato.exceptions import PolicyError
from legato.injection._match import clean_text, record_keys

__all__ = ["Endorse", "Policy", "Secret", "Trust"]


@dataclass(frozen=True, slots=True)
class Trust:
    """The fields of the records `tool` returns are trusted (all leaves when `fields` is empty).

    Args:
        tool: The read tool whose results the policy covers.
        fields: The record fields whose values are trusted (empty: every field: use only
            for results the platform writes, such as a directory of channels).
        where: Only records whose fields hold these values (the record's author).
    """

    tool: str
    fields: tuple[str, ...] = ()
    where: Mapping[str, str] = field(default_factory=lambda: {})

    def describe(self) -> str:
        """The policy as one line: `trust get_channels`, `trust t.recipient where sender=me`."""
        target = ", ".join(f"{self.tool}.{f}" for f in self.fields) or f"{self.tool} (all fields)"
        where = " and ".join(f"{k}={v}" for k, v in self.where.items())
        return f"trust {target}" + (f" where {where}" if where else "")

    def keys(self, result: object) -> set[str]:
        """The typed keys this policy vouches for in a parsed JSON result."""
        keys: set[str] = set()
        for record in _records(result):
            if not all(_same(record.get(k), v) for k, v in self.where.items()):
                continue
            if not self.fields:
                keys |= record_keys(record)
                continue
            for name in self.fields:
                if name in record:
                    keys |= record_keys(record[name])
        if not self.fields and not self.where and not isinstance(result, dict):
            keys |= record_keys(result)  # a flat list of names
        return keys


@dataclass(frozen=True, slots=True)
class Endorse:
    """Values endorsed once by whoever configures the run (they count as the user's words)."""

    values: tuple[str, ...]

    def describe(self) -> str:
        """The policy as one line."""
        return "endorsed " + ", ".join(self.values)


@dataclass(frozen=True, slots=True)
class Secret:
    """The named fields of the records `tool` returns are secret (a secrecy label).

    Args:
        tool: The read tool whose results hold the secrets.
        fields: The record fields whose values are secret (at least one).
        readers: Recipients a secret may go to without a question (the user's own
            address); compared in the same normal form as recipient sinks.
    """

    tool: str
    fields: tuple[str, ...]
    readers: tuple[str, ...] = ()

    def describe(self) -> str:
        """The policy as one line: `secret t.passport readers a@b.test`."""
        target = ", ".join(f"{self.tool}.{f}" for f in self.fields)
        readers = f" readers {', '.join(self.readers)}" if self.readers else ""
        return f"secret {target}{readers}"

    def values(self, result: object) -> list[str]:
        """The secret values in a parsed JSON result, in normal form (`clean_text`)."""
        out: list[str] = []
        for record in _records(result):
            for name in self.fields:
                value = record.get(name)
                if value is None or isinstance(value, (bool, dict, list)):
                    continue
                text = clean_text(str(value)).strip()
                if text:
                    out.append(text)
        return out


Policy = Trust | Endorse | Secret
"""A one-line policy for data-derived sinks (or, `Secret`, for data that must not leave)."""


def _records(value: object) -> Iterator[dict[str, object]]:
    """Every JSON object in `value`, outermost first."""
    if isinstance(value, dict):
        record = cast("dict[str, object]", value)
        yield record
        for v in record.values():
            yield from _records(v)
    elif isinstance(value, list):
        for item in cast("list[object]", value):
            yield from _records(item)


def _same(value: object, wanted: str) -> bool:
    if value is None or isinstance(value, (dict, list)):
        return False
    return clean_text(str(value)).strip() == clean_text(wanted).strip()


def check_policies(policies: Collection[Policy], known: Collection[str]) -> None:
    """`PolicyError` for a policy naming an unknown tool, or malformed."""
    for policy in policies:
        if isinstance(policy, Endorse):
            values = cast("tuple[object, ...]", policy.values)
            if not values or not all(isinstance(v, str) and v.strip() for v in values):
                msg = f"{policy.describe()!r}: endorse at least one non-empty value"
                raise PolicyError(msg)
            continue
        if not isinstance(policy, (Trust, Secret)):  # pyright: ignore[reportUnnecessaryIsInstance]
            msg = f"not a policy: {policy!r} (use Trust, Endorse or Secret)"
            raise PolicyError(msg)
        if isinstance(policy, Secret) and not policy.fields:
            msg = f"policy {policy.describe()!r}: name the secret fields"
            raise PolicyError(msg)
        if policy.tool not in known:
            msg = (
                f"policy {policy.describe()!r} names unknown tool {policy.tool!r}; "
                f"tools: {', '.join(sorted(known)) or 'none'}"
            )
            raise PolicyError(msg)
        if isinstance(cast("object", policy.fields), str):
            msg = f"policy {policy.tool!r}: fields must be a tuple of names, not a string"
            raise PolicyError(msg)
        extra = policy.where if isinstance(policy, Trust) else policy.readers
        named = cast("tuple[object, ...]", (*policy.fields, *extra))
        if not all(isinstance(f, str) and f.strip() for f in named):
            msg = f"policy {policy.describe()!r}: a field name is empty"
            raise PolicyError(msg)
