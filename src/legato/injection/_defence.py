"""`InjectionDefence`: the structural prompt-injection defence, as a gate hook.

It holds even when the model obeys every instruction it reads, because it never asks
the model anything. It watches the journal (`on_event`) and indexes every value that
enters the run under its source (`legato.injection._provenance`), and at admission of a
side-effecting call it looks each declared sink argument up:

- found in a trusted source (the user, the instructions, a grant) -> admitted;
- found only in untrusted content (a tool result, an MCP server, memory, a summary)
  -> blocked, and the model is told why;
- found nowhere (derived, decoded, made up) -> asked.

A tool outside the run's `Grant` is asked; a tool with side effects and no declared sinks
is refused unless it declares `trusted_arguments`. Tools named in `quarantine` return a
handle (`$q1`) instead of their text; the text is dereferenced only inside tool
arguments, where its provenance still applies. Every block and question is a
`SinkDecision`, explained in the journal (`HookApplied`), the stream, the CLI and to the
model, once.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal, TypeAlias

from legato.events import JournalEvent, SpawnStarted, ToolCallFinished, UserPrompt
from legato.exceptions import CapabilityError, PolicyError, QuarantineError, ToolDefinitionError
from legato.injection._grants import Grant
from legato.injection._match import (
    ValueIndex,
    clean_text,
    compact,
    embedded_links,
    normalise_email,
    parse_json,
    sink_atoms,
    sink_keys,
    user_ids,
)
from legato.injection._policy import Endorse, Policy, Secret, Trust, check_policies
from legato.injection._provenance import Source, sources_of
from legato.messages import JsonValue, ToolResultPart
from legato.security._hooks import (
    ALLOW,
    AdmissionOutcome,
    Ask,
    Block,
    Hook,
    HookContext,
    Modify,
    ResultOutcome,
    RunEnd,
    ToolAdmission,
)
from legato.tools import Tool
from legato.tools._tool import SINK_KINDS

__all__ = ["InjectionDefence", "Layers", "Rule", "SinkDecision"]

Rule: TypeAlias = Literal[
    "policy",
    "id-reference",
    "sink-untrusted",
    "link-untrusted",
    "sink-unknown",
    "sink-from-data",
    "no-sinks",
    "not-granted",
    "value-not-granted",
    "secret",
]
"""Why a call was blocked or asked."""

_RULE_TEXT: dict[str, str] = {
    "policy": "a policy vouches for the value",
    "id-reference": "the value is the id of an object a tool returned, named in no content",
    "sink-untrusted": "the value appears only in untrusted content",
    "link-untrusted": "a link or address written in this argument appears only in untrusted content",
    "sink-unknown": "the value appears in no source of this run (derived or made up)",
    "sink-from-data": "the value comes from tool content, as the grant allows; confirm it",
    "no-sinks": "the tool has side effects and declares no sink parameters",
    "not-granted": "the tool is outside what this run was granted",
    "value-not-granted": "the value is not one the user granted for this argument",
    "secret": "the argument carries a value a Secret policy labels secret",
}

_HANDLE = re.compile(r"\$q\d+\b")


@dataclass(frozen=True, slots=True, kw_only=True)
class Layers:
    """Which parts of the defence are on (all by default; ablations switch one off)."""

    provenance: bool = True
    """Off: every source counts as trusted."""
    sinks: bool = True
    """Off: sink arguments are not checked at all."""
    normalise: bool = True
    """Off: a sink value is matched verbatim (substring), without typed normalisation."""
    capabilities: bool = True
    """Off: the grant is not enforced."""
    quarantine: bool = True
    """Off: quarantined tools return their text to the model."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SinkDecision:
    """One block or question, with everything a person needs to judge it."""

    verdict: Literal["block", "ask", "allow"]
    """`allow`: admitted by a policy or as an id reference (listed by `admissions`)."""
    rule: Rule
    tool: str
    call_id: str
    argument: str | None = None
    value: str | None = None
    """The value, redacted when it is a credential, shortened when long."""
    source: str | None = None
    """Where the value came from (the untrusted source, or the policy that vouched)."""
    note: str = ""
    """What else a person needs: the policies that cover the tool and did not vouch."""

    def explain(self) -> str:
        """The one-line explanation shown in the journal, the stream, the CLI and to the model."""
        target = f"{self.tool}.{self.argument}" if self.argument else self.tool
        value = f" = {self.value!r}" if self.value is not None else ""
        source = f" (from {self.source})" if self.source else ""
        note = f"; {self.note}" if self.note else ""
        return f"{target}{value}{source}: {_RULE_TEXT[self.rule]}{note} [rule {self.rule}]"


def _redact(value: str, kind: str) -> str:
    if kind == "credential":
        return f"<redacted, {len(value)} chars>"
    return value if len(value) <= 60 else value[:57] + "..."


class _RawIndex:
    """The naive matcher (layer `normalise` off): verbatim substrings, no types."""

    def __init__(self) -> None:
        self._trusted: list[str] = []
        self._untrusted: list[tuple[str, str]] = []

    def add(self, text: str, *, source: str, trusted: bool) -> None:
        if trusted:
            self._trusted.append(text)
        else:
            self._untrusted.append((text, source))

    def find_value(self, value: str) -> tuple[str, str | None]:
        if any(value in t for t in self._trusted):
            return "trusted", None
        for text, source in self._untrusted:
            if value in text:
                return "untrusted", source
        return "nowhere", None


@dataclass(kw_only=True)
class _RunState:
    index: ValueIndex = field(default_factory=ValueIndex)
    raw: _RawIndex = field(default_factory=_RawIndex)
    grant: Grant = field(default_factory=Grant)
    untrusted_seen: str | None = None
    """The first untrusted source; from then on the grant only narrows."""
    tools: dict[str, Tool] = field(default_factory=lambda: {})
    quarantined: dict[str, tuple[str, Source]] = field(default_factory=lambda: {})
    decisions: list[SinkDecision] = field(default_factory=lambda: [])
    admitted: list[SinkDecision] = field(default_factory=lambda: [])
    secrets: dict[str, tuple[Secret, str]] = field(default_factory=lambda: {})
    """A secret value (normal form, compacted) -> the policy labelling it and its source."""
    ended: bool = False
    prompted: bool = False


class InjectionDefence(Hook):
    """Blocks side effects steered by untrusted content; see the module documentation.

    Args:
        grant: What runs may do before anyone is asked (default: every tool).
        quarantine: Tools whose results reach the model as a handle, not as text.
        tools: The agent's tools, checked now: a side-effecting tool with no sinks and
            no `trusted_arguments` is a `ToolDefinitionError`, a grant naming an unknown
            tool a `PolicyError`.
        grant_for: Derives a run's grant from the user's request (its first prompt),
            before any untrusted content; the result is narrowed to `grant`.
        policies: One-line policies for data-derived sinks (`Trust`, `Endorse`) and
            secrecy labels (`Secret`); checked
            against `tools` now (`PolicyError` for an unknown tool, or with no `tools`).
        layers: Switch parts off (evaluation only).
    """

    def __init__(
        self,
        *,
        grant: Grant | None = None,
        quarantine: Collection[str] = (),
        tools: Collection[Tool] | None = None,
        grant_for: Callable[[str], Grant] | None = None,
        policies: Collection[Policy] = (),
        layers: Layers | None = None,
    ) -> None:
        self.grant = grant or Grant()
        self.policies = tuple(policies)
        if self.policies and tools is None:
            msg = "policies are checked against the agent's tools: pass tools= as well"
            raise PolicyError(msg)
        self.grant_for = grant_for
        self.quarantine = frozenset(quarantine)
        self.layers = layers or Layers()
        self._runs: dict[str, _RunState] = {}
        self._parent: dict[str, str] = {}
        """Child run id -> parent run id (children share their parent's hooks)."""
        self._known: dict[str, Tool] = {}
        if tools is not None:
            self.check(tools)

    # -- configuration ---------------------------------------------------------------------------

    def check(self, tools: Collection[Tool]) -> None:
        """Check the agent's tools and the grant against each other (see the class)."""
        for t in tools:
            if t.side_effects != "none" and not _sinks_of(t) and not t.trusted_arguments:
                msg = (
                    f"tool {t.name!r} has side effects but declares no sinks: pass "
                    "sinks={'param': 'recipient' | 'account' | 'url' | 'path' | 'command' | "
                    "'credential' | 'id' | 'time' | 'text'}, or trusted_arguments=True if no "
                    "argument can steer where its effect lands"
                )
                raise ToolDefinitionError(msg)
            self._known[t.name] = t
        self.grant.check(self._known)
        check_policies(self.policies, self._known)

    def narrow(self, run_id: str, *, tools: Collection[str]) -> None:
        """Narrow a run's grant to `tools` (allowed at any time)."""
        state = self._state(run_id)
        state.grant = state.grant.narrow(tools=tools)

    def extend(self, run_id: str, grant: Grant) -> None:
        """Replace a run's grant; widening is a `CapabilityError` once untrusted content arrived."""
        state = self._state(run_id)
        if state.untrusted_seen is not None and state.grant.widens(grant):
            msg = (
                f"run {run_id}: capabilities can only narrow after untrusted content arrived "
                f"(first from {state.untrusted_seen}); a call outside them is asked instead"
            )
            raise CapabilityError(msg)
        state.grant = grant
        self._add_grant_values(state, grant)

    def decisions(self, run_id: str) -> list[SinkDecision]:
        """The blocks and questions of a run, in order."""
        return list(self._state(run_id).decisions)

    def admissions(self, run_id: str) -> list[SinkDecision]:
        """The sink values of a run admitted by a policy or as id references, in order."""
        return list(self._state(run_id).admitted)

    def _state(self, run_id: str) -> _RunState:
        state = self._runs.get(run_id)
        if state is None:
            state = _RunState(grant=self.grant, tools=dict(self._known))
            self._add_grant_values(state, self.grant)
            for policy in self.policies:
                if isinstance(policy, Endorse):
                    for value in policy.values:
                        self._index(state, value, Source(kind="policy", name=policy.describe()))
            self._runs[run_id] = state
            parent = self._parent.get(run_id)
            if parent is not None:
                self._inherit(state, self._state(parent))
        return state

    def _inherit(self, child: _RunState, parent: _RunState) -> None:
        """A child sees what its parent saw, under the same labels, and no more trust."""
        child.index, child.raw = parent.index, parent.raw
        child.secrets = parent.secrets
        child.grant = parent.grant
        child.untrusted_seen = parent.untrusted_seen

    def _add_grant_values(self, state: _RunState, grant: Grant) -> None:
        for args in grant.values.values():
            for values in args.values():
                for value in values:
                    self._index(state, value, Source(kind="grant"))

    # -- provenance -----------------------------------------------------------------------------------

    def _source(self, state: _RunState, name: str, call_id: str) -> Source:
        t = state.tools.get(name)
        server = t.metadata.get("mcp_server") if t is not None else None
        if isinstance(server, str):
            return Source(kind="mcp", name=server, call_id=call_id)
        if name == "recall":
            return Source(kind="memory", name=name, call_id=call_id)
        if name in ("spawn", "wait_children"):
            return Source(kind="child", name=name, call_id=call_id)
        return Source(kind="tool", name=name, call_id=call_id)

    def _index(self, state: _RunState, text: str, source: Source) -> None:
        trusted = source.trusted or not self.layers.provenance
        label = source.describe()
        if self.layers.normalise:
            state.index.add(text, source=label, trusted=trusted)
            if source.trusted:
                state.index.add_keys(user_ids(text), source=label, trusted=True)
        else:
            state.raw.add(text, source=label, trusted=trusted)
        if not source.trusted and state.untrusted_seen is None:
            state.untrusted_seen = label

    def on_event(self, event: JournalEvent, ctx: HookContext) -> None:
        """Index what `event` brings into the run, under its source."""
        if not ctx.run_id:
            return
        if isinstance(event, SpawnStarted):
            child = event.lineage.run_id
            self._parent[child] = ctx.run_id
            if child in self._runs:  # the child's first events came first
                self._inherit(self._runs[child], self._state(ctx.run_id))
            return
        state = self._state(ctx.run_id)
        if isinstance(event, UserPrompt) and ctx.run_id in self._parent:
            return  # a child's task is its parent model's words: its values keep their sources
        if (
            isinstance(event, UserPrompt)
            and self.grant_for is not None
            and not state.prompted
            and not event.retry
        ):
            state.prompted = True
            asked = self.grant_for(event.message.text)
            if state.grant.tools is not None:
                asked = asked.narrow(tools=state.grant.tools)
            if state.untrusted_seen is None:
                state.grant = asked
                self._add_grant_values(state, asked)
        if isinstance(event, ToolCallFinished) and event.call.id in state.quarantined:
            return  # the model saw only the handle; its text was indexed when it was made
        for labelled in sources_of(event, lambda n, c: self._source(state, n, c)):
            if labelled.text:
                self._index(state, labelled.text, labelled.source)
        if isinstance(event, ToolCallFinished) and not event.result.is_error:
            self._apply_policies(state, event.call.name, event.result.text)
            self._label_secrets(state, event.call.name, event.call.id, event.result.text)

    def _label_secrets(self, state: _RunState, tool: str, call_id: str, text: str) -> None:
        """Remember the values the `Secret` policies of `tool` label in its result."""
        covering = [p for p in self.policies if isinstance(p, Secret) and p.tool == tool]
        parsed = parse_json(text) if covering else None
        if parsed is None:
            return
        for policy in covering:
            for value in policy.values(parsed):
                key = compact(value)
                if key:
                    state.secrets.setdefault(key, (policy, f"{tool} (call {call_id})"))

    def _apply_policies(self, state: _RunState, tool: str, text: str) -> None:
        """Index what the `Trust` policies of `tool` vouch for in its result, as trusted."""
        covering = [p for p in self.policies if isinstance(p, Trust) and p.tool == tool]
        if not covering or not self.layers.normalise:
            return
        parsed = parse_json(text)
        if parsed is None:
            return
        for policy in covering:
            keys = policy.keys(parsed)
            if keys:
                label = f"policy {policy.describe()}"
                state.index.add_keys(keys, source=label, trusted=True)

    async def on_run_end(self, end: RunEnd, ctx: HookContext) -> None:
        """Expire the run's quarantine handles and drop its index (its decisions stay)."""
        state = self._runs.get(ctx.run_id)
        if state is not None and end.status != "parked":
            state.ended = True
            state.index, state.raw = ValueIndex(), _RawIndex()
            state.secrets = {}
            state.quarantined = {h: ("", s) for h, (_, s) in state.quarantined.items()}

    # -- quarantine -------------------------------------------------------------------------------------

    async def after_tool_result(self, result: ToolResultPart, ctx: HookContext) -> ResultOutcome:
        """Replace a quarantined tool's text with a handle the model can cite but not read."""
        if not self.layers.quarantine or result.name not in self.quarantine or result.is_error:
            return ALLOW
        state = self._state(ctx.run_id)
        handle = f"$q{len(state.quarantined) + 1}"
        source = self._source(state, result.name, result.call_id)
        state.quarantined[result.call_id] = (result.text, source)
        state.quarantined[handle] = (result.text, source)
        self._index(state, result.text, source)
        note = (
            f"{handle}: {len(result.text)} characters of untrusted content from {result.name}, "
            f"quarantined. Pass {handle} as an argument to use it, or extract values with "
            "the `extract` tool; you cannot read it."
        )
        return Modify(
            ToolResultPart.text_result(call_id=result.call_id, name=result.name, text=note),
            reason=f"quarantined as {handle}",
        )

    def dereference(self, run_id: str, handle: str) -> tuple[str, Source]:
        """The text behind a quarantine handle and its source (`QuarantineError` if none)."""
        state = self._runs.get(run_id)
        found = state.quarantined.get(handle) if state is not None else None
        if state is None or found is None or not handle.startswith("$q"):
            msg = f"no quarantined content {handle!r} in run {run_id}"
            raise QuarantineError(msg)
        if state.ended:
            msg = f"quarantine handle {handle!r} belongs to run {run_id}, which has ended"
            raise QuarantineError(msg)
        return found

    def _deref(self, state: _RunState, value: JsonValue) -> JsonValue:
        if isinstance(value, str):
            return _HANDLE.sub(lambda m: state.quarantined.get(m.group(0), (m.group(0),))[0], value)
        if isinstance(value, list):
            return [self._deref(state, v) for v in value]
        if isinstance(value, dict):
            return {k: self._deref(state, v) for k, v in value.items()}
        return value

    # -- admission -----------------------------------------------------------------------------------------

    async def before_tool_admission(
        self, admission: ToolAdmission, ctx: HookContext
    ) -> AdmissionOutcome:
        """Block, ask or admit a call by where its sink values came from."""
        state = self._state(ctx.run_id)
        call = admission.call
        if admission.tool is not None:
            state.tools.setdefault(call.name, admission.tool)
        arguments = admission.arguments
        modified = False
        takes_handles = admission.tool is not None and admission.tool.metadata.get("takes_handles")
        if state.quarantined and isinstance(arguments, dict) and not takes_handles:
            derefd = self._deref(state, arguments)
            modified = derefd != arguments
            arguments = derefd
        decision = (
            self._judge(state, admission, arguments) if admission.side_effects != "none" else None
        )
        if decision is not None:
            state.decisions.append(decision)
            text = decision.explain()
            return Block(text) if decision.verdict == "block" else Ask(text)
        if modified and isinstance(arguments, dict):
            return Modify(dict(arguments), reason="quarantine handles dereferenced")
        return ALLOW

    def _judge(
        self, state: _RunState, admission: ToolAdmission, arguments: JsonValue
    ) -> SinkDecision | None:
        call = admission.call
        t = admission.tool or state.tools.get(call.name)
        sinks: Mapping[str, str] = _sinks_of(t) if t is not None else {}
        if t is not None and not sinks and not t.trusted_arguments:
            return SinkDecision(verdict="block", rule="no-sinks", tool=call.name, call_id=call.id)
        asked: SinkDecision | None = None
        args = arguments if isinstance(arguments, dict) else {}
        if self.layers.sinks:
            for name, kind in sinks.items():
                for value in _strings(args.get(name)):
                    decision = self._check_sink(state, call.name, call.id, name, kind, value)
                    if decision is not None and decision.verdict == "block":
                        return decision  # a block wins over any question
                    asked = asked or decision
            block = self._check_links(state, call.name, call.id, args, sinks)
            if block is not None:
                return block
            secret = self._check_secrets(state, call.name, call.id, args, sinks)
            if secret is not None:
                return secret
        if self.layers.capabilities:
            if not state.grant.allows_tool(call.name):
                return SinkDecision(
                    verdict="ask", rule="not-granted", tool=call.name, call_id=call.id
                )
            decision = self._check_values(state.grant, call.name, call.id, args)
            if decision is not None:
                return decision
        return asked

    def _check_values(
        self, grant: Grant, tool: str, call_id: str, args: Mapping[str, JsonValue]
    ) -> SinkDecision | None:
        for name, allowed in grant.values.get(tool, {}).items():
            wanted = {clean_text(v).strip() for v in allowed}
            for value in _strings(args.get(name)):
                if clean_text(value).strip() not in wanted:
                    return SinkDecision(
                        verdict="ask",
                        rule="value-not-granted",
                        tool=tool,
                        call_id=call_id,
                        argument=name,
                        value=_redact(value, "text"),
                    )
        return None

    def _check_sink(
        self, state: _RunState, tool: str, call_id: str, name: str, kind: str, value: str
    ) -> SinkDecision | None:
        source: str | None
        if not self.layers.normalise:
            found, source = state.raw.find_value(value)
        elif kind == "id":
            return self._check_id(state, tool, call_id, name, value)
        else:
            found, source = state.index.find_all(*sink_atoms(value, kind))
        if found == "trusted":
            self._note_policy(state, tool, call_id, name, kind, value)
            return None
        data_ok = name in self.grant_from_data(state, tool)
        rule: Rule
        if found == "untrusted":
            rule = "sink-from-data" if data_ok else "sink-untrusted"
        else:
            rule = "sink-unknown"
        return SinkDecision(
            verdict="block" if rule == "sink-untrusted" else "ask",
            rule=rule,
            tool=tool,
            call_id=call_id,
            argument=name,
            value=_redact(value, kind),
            source=source,
            note=self._uncovered(source),
        )

    def _check_links(
        self,
        state: _RunState,
        tool: str,
        call_id: str,
        args: Mapping[str, JsonValue],
        sinks: Mapping[str, str],
    ) -> SinkDecision | None:
        """A link or address written into free text is a sink too: block one only content gave.

        (A message body may be composed, so a link found nowhere passes; one that only
        untrusted content holds is where an injection wants the reader to go.)
        """
        if not self.layers.normalise:
            return None
        for name, value in args.items():
            if name in sinks:
                continue
            for text in _strings(value):
                for kind, link in embedded_links(text):
                    found, source = state.index.find_all(*sink_atoms(link, kind))
                    if found == "untrusted":
                        return SinkDecision(
                            verdict="block",
                            rule="link-untrusted",
                            tool=tool,
                            call_id=call_id,
                            argument=name,
                            value=_redact(link, kind),
                            source=source,
                        )
        return None

    def _check_secrets(
        self,
        state: _RunState,
        tool: str,
        call_id: str,
        args: Mapping[str, JsonValue],
        sinks: Mapping[str, str],
    ) -> SinkDecision | None:
        """Ask about a call that carries a value a `Secret` policy labelled, in any argument.

        Unless every recipient of the call (its `recipient`, `account` and `url` sinks) is
        one of the policy's readers: the secret then goes only where the policy said it may.
        """
        if not state.secrets:
            return None
        recipients = {
            _reader(value)
            for name, kind in sinks.items()
            if kind in ("recipient", "url", "account")
            for value in _strings(args.get(name))
        }
        for name, value in args.items():
            for text in _strings(value):
                carried = compact(clean_text(text))
                for secret, (policy, source) in state.secrets.items():
                    if secret not in carried:
                        continue
                    readers = {_reader(r) for r in policy.readers}
                    if recipients and recipients <= readers:
                        continue
                    return SinkDecision(
                        verdict="ask",
                        rule="secret",
                        tool=tool,
                        call_id=call_id,
                        argument=name,
                        value=_redact(secret, "credential"),
                        source=f"{source}, {policy.describe()}",
                    )
        return None

    def _check_id(
        self, state: _RunState, tool: str, call_id: str, name: str, value: str
    ) -> SinkDecision | None:
        """An id sink: the user's words admit; content that names it blocks; a reference passes."""
        atoms = sink_keys(value, "id")
        key = atoms[0][0] if atoms else f"id:{value}"
        found, source = state.index.find_source([key])
        decision = SinkDecision(
            verdict="block",
            rule="sink-untrusted",
            tool=tool,
            call_id=call_id,
            argument=name,
            value=_redact(value, "id"),
            source=source,
        )
        if found == "trusted":
            return None
        if found == "untrusted":
            return decision  # someone wrote this id in content: theirs, not the system's
        ref, ref_source = state.index.find_source(["ref:" + key.removeprefix("id:")])
        if ref == "nowhere":
            return replace(decision, verdict="ask", rule="sink-unknown", source=None)
        state.admitted.append(
            replace(decision, verdict="allow", rule="id-reference", source=ref_source)
        )
        return None

    def _note_policy(
        self, state: _RunState, tool: str, call_id: str, name: str, kind: str, value: str
    ) -> None:
        """Keep the admissions a policy made (the user's own words need no note)."""
        if not self.policies:
            return
        for atom in sink_keys(value, kind):
            _, source = state.index.find_source([a.removeprefix("whole:") for a in atom])
            if source is not None and source.startswith("policy"):
                state.admitted.append(
                    SinkDecision(
                        verdict="allow",
                        rule="policy",
                        tool=tool,
                        call_id=call_id,
                        argument=name,
                        value=_redact(value, kind),
                        source=source,
                    )
                )
                return

    def _uncovered(self, source: str | None) -> str:
        """For a block: the policies covering the tool the value came from (none vouched)."""
        if source is None:
            return ""
        named = [
            p.describe()
            for p in self.policies
            if isinstance(p, Trust) and source.startswith(p.tool + " ")
        ]
        return f"no policy vouches for it ({'; '.join(named)})" if named else ""

    def grant_from_data(self, state: _RunState, tool: str) -> frozenset[str]:
        """The sink arguments of `tool` the run's grant lets come from tool content."""
        return state.grant.from_data.get(tool, frozenset())


_KINDS = SINK_KINDS


def _sinks_of(t: Tool) -> Mapping[str, str]:
    """The sink parameters of `t` and their kinds.

    For an MCP tool that declares none locally: every string parameter, typed by the
    kinds the server announces (an announcement can never remove a sink).
    """
    if t.sinks or t.trusted_arguments or "mcp_server" not in t.metadata:
        return t.sinks
    props = t.parameters.get("properties")
    if not isinstance(props, dict):
        return {}
    announced = t.metadata.get("mcp_sinks")
    kinds = announced if isinstance(announced, dict) else {}
    sinks: dict[str, str] = {}
    for name, schema in props.items():
        if isinstance(schema, dict) and schema.get("type") in ("string", None):
            kind = kinds.get(name)
            sinks[name] = kind if isinstance(kind, str) and kind in _KINDS else "text"
    return sinks


def _reader(value: str) -> str:
    """A recipient in the form readers are compared in."""
    return normalise_email(value) or clean_text(value).strip()


def _strings(value: JsonValue) -> Iterator[str]:
    if value is None:
        return
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        yield json.dumps(value, ensure_ascii=False)
    else:
        yield str(value)
