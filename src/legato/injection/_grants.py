"""Capabilities of a run: which tools it may use and which values they may take.

A `Grant` is fixed from the configuration and the user's request. Once the first
untrusted result has arrived it can only narrow (`Grant.narrow`); a call outside it is
asked, and the approval admits that one call, never the grant itself.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field

from legato.exceptions import PolicyError

__all__ = ["SYNONYMS", "Grant", "grant_from_prompt"]


def _frozen(
    values: Mapping[str, Mapping[str, Iterable[str]]],
) -> dict[str, dict[str, tuple[str, ...]]]:
    return {t: {a: tuple(v) for a, v in args.items()} for t, args in values.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class Grant:
    """What a run may do before anyone is asked.

    Args:
        tools: The side-effecting tools the run may call (None: every tool of the agent).
        values: Per tool and argument, the values the user supplied (they count as
            trusted; a side-effecting call with another value for a listed argument is asked).
        from_data: Per tool, the sink arguments whose values may come from tool content
            (the user asked for that: "pay the bill in my inbox"); such a value is asked,
            not blocked.
    """

    tools: frozenset[str] | None = None
    values: Mapping[str, Mapping[str, tuple[str, ...]]] = field(default_factory=lambda: {})
    from_data: Mapping[str, frozenset[str]] = field(default_factory=lambda: {})

    @classmethod
    def of(
        cls,
        tools: Iterable[str] | None = None,
        *,
        values: Mapping[str, Mapping[str, Iterable[str]]] | None = None,
        from_data: Mapping[str, Iterable[str]] | None = None,
    ) -> Grant:
        """A grant from plain collections (`PolicyError` for a malformed one)."""
        if isinstance(tools, str):
            msg = f"grant tools must be a collection of tool names, not the string {tools!r}"
            raise PolicyError(msg)
        for tool, args in (from_data or {}).items():
            if isinstance(args, str):
                msg = f"grant from_data[{tool!r}] must be a collection of argument names"
                raise PolicyError(msg)
        return cls(
            tools=None if tools is None else frozenset(tools),
            values=_frozen(values or {}),
            from_data={t: frozenset(a) for t, a in (from_data or {}).items()},
        )

    def allows_tool(self, name: str) -> bool:
        """Whether `name` is granted."""
        return self.tools is None or name in self.tools

    def narrow(self, *, tools: Collection[str]) -> Grant:
        """This grant without the tools not in `tools` (never adds one)."""
        kept = frozenset(tools) if self.tools is None else self.tools & frozenset(tools)
        return Grant(tools=kept, values=self.values, from_data=self.from_data)

    def check(self, known: Collection[str]) -> None:
        """`PolicyError` for a grant naming a tool that is not one of `known`."""
        named = set(self.tools or ()) | set(self.values) | set(self.from_data)
        unknown = sorted(named - set(known))
        if unknown:
            msg = (
                f"grant names unknown tool(s) {', '.join(unknown)}; "
                f"tools: {', '.join(sorted(known)) or 'none'}"
            )
            raise PolicyError(msg)

    def widens(self, other: Grant) -> bool:
        """Whether `other` allows anything this grant does not.

        That is a tool, a trusted value, or a sink whose value may come from data.
        """
        if other.tools is None:
            wider_tools = self.tools is not None
        else:
            wider_tools = self.tools is not None and not other.tools <= self.tools
        new_values = any(
            not set(values) <= set(self.values.get(tool, {}).get(arg, ()))
            for tool, args in other.values.items()
            for arg, values in args.items()
        )
        new_data = any(
            not args <= self.from_data.get(tool, frozenset())
            for tool, args in other.from_data.items()
        )
        return wider_tools or new_values or new_data


_STOP = frozenset(
    "a an the to of by for from in on at and or with new my me get set create update add "
    "make do user users all".split()
)
SYNONYMS: Mapping[str, tuple[str, ...]] = {
    "email": ("e-mail", "mail", "emails", "mails", "write to", "reply"),
    "send": (
        "send",
        "sent",
        "write",
        "forward",
        "reply",
        "refund",
        "pay",
        "transfer",
        "tell",
        "post",
    ),
    "money": (
        "pay",
        "payment",
        "refund",
        "transfer",
        "money",
        "rent",
        "bill",
        "difference",
        "back",
    ),
    "transaction": ("payment", "standing order", "transaction", "rent", "recurring"),
    "scheduled": ("standing order", "scheduled", "recurring", "rent", "adjust"),
    "schedule": ("standing order", "schedule", "recurring", "every month"),
    "reserve": ("book", "booking", "reserve", "reservation"),
    "delete": ("delete", "remove", "clean"),
    "remove": ("delete", "remove", "kick"),
    "from": (),
    "message": ("message", "dm", "tell", "send", "post", "write"),
    "direct": ("direct message", "dm", "send", "tell", "write"),
    "channel": ("channel",),
    "webpage": ("website", "webpage", "web page", "site", "page", "url", "www."),
    "post": ("post", "publish", "upload"),
    "invite": ("invite",),
    "password": ("password",),
    "calendar": ("calendar", "event", "meeting", "appointment", "schedule", "lunch", "dinner"),
    "event": ("event", "meeting", "appointment", "calendar", "lunch", "dinner", "reminder"),
    "slack": ("slack", "workspace"),
    "cancel": ("cancel",),
    "reschedule": ("reschedule", "move", "postpone"),
    "hotel": ("hotel", "accommodation", "stay"),
    "restaurant": ("restaurant", "dinner", "lunch", "table"),
    "car": ("car", "rental", "vehicle"),
    "rental": ("rental", "rent", "car"),
    "participants": ("participant", "invite", "meeting", "attendee"),
    "share": ("share",),
    "append": ("append", "add", "write", "update", "note"),
    "file": ("file", "document", "list", "doc"),
    "info": ("address", "information", "profile", "info", "name"),
}
"""Words of a prompt that stand for a word of a tool's name."""


def grant_from_prompt(
    prompt: str,
    tools: Iterable[str],
    *,
    read_only: Collection[str] = (),
    synonyms: Mapping[str, tuple[str, ...]] = SYNONYMS,
) -> Grant:
    """A grant of the side-effecting tools the prompt plausibly asks for (opt-in).

    A tool is granted when every word of its name (`send_money`: send, money) occurs in
    the prompt, itself or as one of its `synonyms`; generic words (get, create, update,
    add, user) do not count. Read-only tools are always granted. Use it as `InjectionDefence(grant_for=...)`:
    it is fixed from the user's first prompt, before any untrusted content, and narrowed
    to the configured grant, so it can only narrow.
    """
    text = " " + " ".join(prompt.casefold().split()) + " "
    granted: set[str] = set(read_only)
    for name in tools:
        if name in granted:
            continue
        words = [w for w in name.casefold().split("_") if w and w not in _STOP]
        if words and all(
            any(form in text for form in (word, *synonyms.get(word, ()))) for word in words
        ):
            granted.add(name)
    return Grant.of(granted)
