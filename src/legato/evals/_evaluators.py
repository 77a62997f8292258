"""Evaluators: typed functions over (case, output, journal) that return a `Score`.

An evaluator is anything with a `name` and an async `evaluate(context) -> Score`. The
built-in ones read the output or the run's journal (tool calls, approvals, contract
rejections, usage, durations); `evaluator` turns a plain typed function into one. An
evaluator that raises, or a judge whose answer does not parse, gives an *unscored* `Score`
(`passed=None`) carrying the reason: the case is marked, the evaluation goes on.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import types
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, Protocol, TypeAlias, cast, runtime_checkable

from legato.evals._judge_cache import JudgeCache, judge_key
from legato.events import (
    ApprovalRequested,
    Journal,
    ModelResponded,
    RunFinished,
    StateRejected,
    ToolCallFinished,
)
from legato.exceptions import ConfigurationError
from legato.messages import JsonValue, ToolCallPart, Usage

if TYPE_CHECKING:
    from legato.budgets import Budget
    from legato.evals._dataset import Case
    from legato.models import Model

__all__ = [
    "EvalContext",
    "Evaluator",
    "Score",
    "Verdict",
    "approvals_asked",
    "case_evaluators",
    "contains",
    "equals",
    "evaluator",
    "evaluator_version",
    "judge",
    "json_schema",
    "matches",
    "max_cost",
    "max_latency",
    "max_tokens",
    "max_tool_calls",
    "no_contract_rejections",
    "tool_called",
    "tool_calls_in_order",
    "tool_not_called",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Score:
    """What one evaluator decided about one run."""

    name: str
    passed: bool | None
    """True / False; None: unscored (the evaluator raised, or a judge's answer did not parse)."""
    value: float | None = None
    """A number, for evaluators that measure (1.0 / 0.0 for pass / fail otherwise)."""
    reason: str = ""
    cost: float = 0.0
    """US dollars the evaluator spent (a judge's model calls, when priced)."""
    version: str = ""
    """The version of the evaluator that gave it (`evaluator_version`); a replay given the
    report this score is in keeps it while the evaluator's version is the same."""

    def to_json(self) -> dict[str, JsonValue]:
        """A JSON object (what the report stores)."""
        return {
            "name": self.name,
            "passed": self.passed,
            "value": self.value,
            "reason": self.reason,
            "cost": self.cost,
            "version": self.version,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, JsonValue]) -> Score:
        """The inverse of `to_json`."""
        passed = data.get("passed")
        value = data.get("value")
        cost = data.get("cost")
        return cls(
            name=str(data["name"]),
            passed=passed if isinstance(passed, bool) else None,
            value=float(value) if isinstance(value, int | float) else None,
            reason=str(data.get("reason", "")),
            cost=float(cost) if isinstance(cost, int | float) else 0.0,
            version=str(data.get("version") or ""),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalContext:
    """What an evaluator sees: the case, the run's output and its journal."""

    case: Case
    output: JsonValue
    """The run's final output in JSON form (a string for text output; None if it failed)."""
    journal: Journal
    budget: Budget | None = None
    """The evaluation's budget: a judge's model calls spend from it."""
    extra: Mapping[str, JsonValue] = field(default_factory=lambda: {})

    @property
    def text(self) -> str:
        """The output as text (JSON text for structured output)."""
        if isinstance(self.output, str):
            return self.output
        return json.dumps(self.output, ensure_ascii=False, sort_keys=True)

    def tool_calls(self) -> list[ToolCallPart]:
        """The tool calls the run made, in journal order (the final-answer call excluded)."""
        return [
            e.call
            for e in self.journal
            if isinstance(e, ToolCallFinished) and e.outcome not in ("output", "skipped")
        ]

    def usage(self) -> Usage:
        """Tokens of every model call the journal records."""
        total = Usage()
        for event in self.journal:
            if isinstance(event, ModelResponded):
                total = total + event.response.usage
        return total

    def cost(self) -> float | None:
        """US dollars of the model calls (None when no call reported a cost)."""
        costs = [
            e.response.cost
            for e in self.journal
            if isinstance(e, ModelResponded) and e.response.cost is not None
        ]
        if not costs:
            finished = [e.cost for e in self.journal if isinstance(e, RunFinished)]
            return finished[-1] if finished and finished[-1] is not None else None
        return sum(costs)

    def latency(self) -> float:
        """Seconds the run's model and tool calls took, from the durations the journal records."""
        return sum(
            e.duration for e in self.journal if isinstance(e, ModelResponded | ToolCallFinished)
        )


Verdict: TypeAlias = "bool | float | Score | tuple[bool, str]"
"""What a custom evaluator function may return: pass/fail, a number in [0, 1] (passes at
0.5 and above), pass/fail with a reason, or a whole `Score`."""


@runtime_checkable
class Evaluator(Protocol):
    """Anything that scores a run."""

    @property
    def name(self) -> str:
        """How the score is labelled in reports."""
        ...

    async def evaluate(self, context: EvalContext) -> Score:
        """Score one run (raising marks the case unscored; the evaluation goes on)."""
        ...


def _as_score(name: str, verdict: object) -> Score:
    if isinstance(verdict, Score):
        return verdict
    if isinstance(verdict, bool):
        return Score(name=name, passed=verdict, value=1.0 if verdict else 0.0)
    if isinstance(verdict, int | float):
        return Score(name=name, passed=float(verdict) >= 0.5, value=float(verdict))
    if isinstance(verdict, tuple):
        pair = cast(tuple[object, ...], verdict)
        if len(pair) == 2 and isinstance(pair[0], bool) and isinstance(pair[1], str):
            ok, reason = pair[0], pair[1]
            return Score(name=name, passed=ok, value=1.0 if ok else 0.0, reason=reason)
    kind = type(cast(object, verdict)).__name__
    msg = f"evaluator {name!r} returned {kind}; expected bool, float, (bool, str) or Score"
    raise TypeError(msg)


@dataclass(frozen=True, slots=True)
class FunctionEvaluator:
    """An evaluator made from a function of `EvalContext` (sync or async).

    Its version is `version` when given, else a digest of the function's code and of the
    values it closes over (see `evaluator_version`).
    """

    function: Callable[[EvalContext], object]
    name: str = ""
    version: str = ""

    async def evaluate(self, context: EvalContext) -> Score:
        """Call the function and turn its verdict into a `Score`."""
        verdict = self.function(context)
        if inspect.isawaitable(verdict):
            verdict = await verdict
        return _as_score(self.name, verdict)


def evaluator(
    function: Callable[[EvalContext], Verdict | Awaitable[Verdict]],
    /,
    *,
    name: str | None = None,
    version: str = "",
) -> FunctionEvaluator:
    """A custom evaluator from a typed function of `EvalContext` (the function's name labels it).

    ```python
    @evaluator
    def short(ctx: EvalContext) -> bool:
        return len(ctx.text) < 200
    ```
    """
    return FunctionEvaluator(function, name or getattr(function, "__name__", "custom"), version)


def _fingerprint(value: object, depth: int = 0) -> JsonValue:
    """A JSON form of what decides an evaluator's behaviour: code, constants, closed-over values.

    Objects it does not know are represented by their type's name (their state is not seen).
    """
    if depth > 8:
        return type(value).__qualname__
    if value is None or isinstance(value, str | int | float | bool):
        return value
    if isinstance(value, list | tuple | frozenset | set):
        items = [_fingerprint(v, depth + 1) for v in cast(Iterable[object], value)]
        if isinstance(value, frozenset | set):
            items = sorted(items, key=lambda v: json.dumps(v, sort_keys=True))
        return items
    if isinstance(value, Mapping):
        mapping = cast(Mapping[object, object], value)
        return {str(k): _fingerprint(v, depth + 1) for k, v in mapping.items()}
    if isinstance(value, re.Pattern):
        pattern = cast("re.Pattern[str]", value)
        return ["re", pattern.pattern, pattern.flags]
    if isinstance(value, types.CodeType):
        return [
            "code",
            value.co_code.hex(),
            _fingerprint(value.co_consts, depth + 1),
            list(value.co_names),
        ]
    if isinstance(value, types.FunctionType):
        cells: list[object] = []
        for cell in value.__closure__ or ():
            try:
                cells.append(cell.cell_contents)
            except ValueError:  # an empty cell
                cells.append(None)
        return [
            "function",
            value.__qualname__,
            _fingerprint(value.__code__, depth + 1),
            _fingerprint(cells, depth + 1),
            _fingerprint(value.__defaults__, depth + 1),
        ]
    if isinstance(value, FunctionEvaluator | Judge):
        return _fingerprint(evaluator_version(value), depth + 1)
    return type(value).__qualname__


def _digest(value: JsonValue) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def evaluator_version(evaluator: object, /) -> str:
    """The version a score is stored with: the evaluator's own `version` when it sets one.

    Otherwise, for a function evaluator, a digest of its function's code and of the
    values it closes over (so editing the function, or building it with another argument,
    changes it). Closed-over values of plain types (text, numbers, lists, mappings,
    patterns, functions) count by content, other objects by their type only; editing a
    helper the function calls is not seen: give `version=` for that. For a
    judge a digest of its model, rubric and instructions. "" for an evaluator with neither:
    it is scored again on every replay.
    """
    given = getattr(evaluator, "version", "")
    if isinstance(given, str) and given:
        return given
    if isinstance(evaluator, FunctionEvaluator):
        return _digest(_fingerprint(evaluator.function))
    return ""


def _check(name: str, ok: bool, reason: str) -> Score:
    return Score(name=name, passed=ok, value=1.0 if ok else 0.0, reason="" if ok else reason)


# -- the output -----------------------------------------------------------------------------------


def equals(expected: JsonValue = None, /, *, use_case: bool = True) -> FunctionEvaluator:
    """The output equals `expected` (by default the case's `expected`); text is stripped first."""

    def check(ctx: EvalContext) -> Score:
        want = ctx.case.expected if expected is None and use_case else expected
        got = ctx.output.strip() if isinstance(ctx.output, str) else ctx.output
        want = want.strip() if isinstance(want, str) else want
        return _check("equals", got == want, f"expected {want!r}, got {got!r}")

    return FunctionEvaluator(check, "equals")


def contains(text: str, /, *, case_sensitive: bool = True) -> FunctionEvaluator:
    """The output's text contains `text`."""

    def check(ctx: EvalContext) -> Score:
        hay, needle = (ctx.text, text) if case_sensitive else (ctx.text.lower(), text.lower())
        return _check(f"contains:{text}", needle in hay, f"{text!r} is not in the output")

    return FunctionEvaluator(check, f"contains:{text}")


def matches(pattern: str, /) -> FunctionEvaluator:
    """The output's text matches the regular expression `pattern` somewhere."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        msg = f"not a regular expression: {pattern!r} ({exc})"
        raise ConfigurationError(msg) from exc

    def check(ctx: EvalContext) -> Score:
        ok = compiled.search(ctx.text) is not None
        return _check("matches", ok, f"no match for /{pattern}/")

    return FunctionEvaluator(check, "matches")


def json_schema(schema: Mapping[str, JsonValue], /) -> FunctionEvaluator:
    """The output (a JSON value, or text holding one) satisfies the JSON Schema `schema`.

    A schema that is not valid JSON Schema is a `ConfigurationError` here, before any run.
    """
    import jsonschema_rs

    def no_remote(uri: str, /) -> JsonValue:
        msg = f"remote reference {uri!r} is not fetched; inline it in the schema"
        raise ValueError(msg)

    try:
        jsonschema_rs.meta.validate(dict(schema))
        validator = jsonschema_rs.validator_for(
            dict(schema), retriever=no_remote, validate_formats=False
        )
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError, ValueError) as exc:
        msg = f"not a valid JSON Schema: {str(exc).strip().splitlines()[0]}"
        raise ConfigurationError(msg) from exc

    def check(ctx: EvalContext) -> Score:
        value = ctx.output
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                return _check("json_schema", False, f"the output is not JSON: {exc.msg}")
        errors = list(validator.iter_errors(value))
        if not errors:
            return _check("json_schema", True, "")
        first = errors[0]
        where = "/".join(str(p) for p in first.instance_path) or "(root)"
        return _check("json_schema", False, f"{where}: {first.message}")

    return FunctionEvaluator(check, "json_schema")


# -- the journal ----------------------------------------------------------------------------------


def _arguments_match(
    got: JsonValue, want: Mapping[str, JsonValue], mode: Literal["subset", "exact"]
) -> bool:
    if not isinstance(got, dict):
        return False
    if mode == "exact":
        return got == dict(want)
    return all(key in got and got[key] == value for key, value in want.items())


def tool_called(
    name: str,
    /,
    *,
    arguments: Mapping[str, JsonValue] | None = None,
    match: Literal["subset", "exact"] = "subset",
    times: int | None = None,
) -> FunctionEvaluator:
    """The run called tool `name`: at least once, or exactly `times` times.

    With `arguments`, only calls whose arguments include them (`subset`) or are exactly
    them (`exact`) count.
    """
    label = f"tool_called:{name}"

    def check(ctx: EvalContext) -> Score:
        calls = [c for c in ctx.tool_calls() if c.name == name]
        if arguments is not None:
            calls = [c for c in calls if _arguments_match(c.arguments, arguments, match)]
        count = len(calls)
        if times is not None:
            return _check(label, count == times, f"{name} called {count} times, expected {times}")
        seen = [c.arguments for c in ctx.tool_calls() if c.name == name]
        why = f"{name} was never called" if not seen else f"{name} called with {seen}"
        return _check(label, count > 0, why)

    return FunctionEvaluator(check, label)


def tool_not_called(name: str, /) -> FunctionEvaluator:
    """The run never called tool `name`."""
    label = f"tool_not_called:{name}"

    def check(ctx: EvalContext) -> Score:
        count = sum(1 for c in ctx.tool_calls() if c.name == name)
        return _check(label, count == 0, f"{name} was called {count} times")

    return FunctionEvaluator(check, label)


def tool_calls_in_order(
    names: Sequence[str], /, *, order: Literal["exact", "in_order", "any"] = "in_order"
) -> FunctionEvaluator:
    """The run's tool calls, by name, against `names`.

    `exact`: this sequence and nothing else; `in_order`: these in this order, others may
    come between; `any`: each of these, in any order.
    """
    wanted = list(names)

    def check(ctx: EvalContext) -> Score:
        made = [c.name for c in ctx.tool_calls()]
        if order == "exact":
            ok = made == wanted
        elif order == "in_order":
            it = iter(made)
            ok = all(any(m == w for m in it) for w in wanted)
        else:
            ok = all(made.count(w) >= wanted.count(w) for w in set(wanted))
        return _check("tool_calls", ok, f"calls were {made}, expected {order} {wanted}")

    return FunctionEvaluator(check, "tool_calls")


def max_tool_calls(limit: int, /) -> FunctionEvaluator:
    """The run made at most `limit` tool calls."""

    def check(ctx: EvalContext) -> Score:
        count = len(ctx.tool_calls())
        return _check("max_tool_calls", count <= limit, f"{count} tool calls > {limit}")

    return FunctionEvaluator(check, "max_tool_calls")


def approvals_asked(*, at_most: int | None = None, at_least: int = 0) -> FunctionEvaluator:
    """The run asked for approval between `at_least` and `at_most` times."""

    def check(ctx: EvalContext) -> Score:
        count = sum(1 for e in ctx.journal if isinstance(e, ApprovalRequested))
        ok = count >= at_least and (at_most is None or count <= at_most)
        return _check("approvals", ok, f"{count} approval requests")

    return FunctionEvaluator(check, "approvals")


def no_contract_rejections() -> FunctionEvaluator:
    """No contract rejected a call, a result or a write in the run."""

    def check(ctx: EvalContext) -> Score:
        rejected = [e for e in ctx.journal if isinstance(e, StateRejected)]
        reason = "; ".join(f"{e.tool} ({e.stage}): {e.message}" for e in rejected)
        return _check("no_contract_rejections", not rejected, reason)

    return FunctionEvaluator(check, "no_contract_rejections")


def max_cost(dollars: float, /) -> FunctionEvaluator:
    """The run cost at most `dollars` (a run whose cost is unknown fails)."""

    def check(ctx: EvalContext) -> Score:
        cost = ctx.cost()
        if cost is None:
            return _check("max_cost", False, "the run's cost is unknown")
        return _check("max_cost", cost <= dollars, f"${cost:.6f} > ${dollars}")

    return FunctionEvaluator(check, "max_cost")


def max_tokens(tokens: int, /) -> FunctionEvaluator:
    """The run's model calls used at most `tokens` input and output tokens together."""

    def check(ctx: EvalContext) -> Score:
        usage = ctx.usage()
        used = usage.input_tokens + usage.output_tokens
        return _check("max_tokens", used <= tokens, f"{used} tokens > {tokens}")

    return FunctionEvaluator(check, "max_tokens")


def max_latency(seconds: float, /) -> FunctionEvaluator:
    """The run's model and tool calls took at most `seconds` (durations from the journal)."""

    def check(ctx: EvalContext) -> Score:
        took = ctx.latency()
        return _check("max_latency", took <= seconds, f"{took:.3f}s > {seconds}s")

    return FunctionEvaluator(check, "max_latency")


def case_evaluators(case: Case) -> list[Evaluator]:
    """The evaluators a case asks for itself.

    `equals` when it has an `expected`, and one per check it sets.
    """
    checks = case.checks
    found: list[Evaluator] = []
    if case.expected is not None:
        found.append(equals())
    found += [contains(text) for text in checks.contains]
    if checks.matches is not None:
        found.append(matches(checks.matches))
    if checks.json_schema is not None:
        found.append(json_schema(checks.json_schema))
    if checks.tools_called:
        found.append(tool_calls_in_order(checks.tools_called))
    found += [tool_not_called(name) for name in checks.tools_not_called]
    if checks.max_tool_calls is not None:
        found.append(max_tool_calls(checks.max_tool_calls))
    if checks.max_cost is not None:
        found.append(max_cost(checks.max_cost))
    if checks.max_tokens is not None:
        found.append(max_tokens(checks.max_tokens))
    if checks.max_latency is not None:
        found.append(max_latency(checks.max_latency))
    if checks.no_contract_rejections:
        found.append(no_contract_rejections())
    if checks.max_approvals is not None:
        found.append(approvals_asked(at_most=checks.max_approvals))
    return found


# -- the judge ------------------------------------------------------------------------------------

_JUDGE_INSTRUCTIONS = """You grade the answer of an AI assistant against a rubric.
Reply with one JSON object and nothing else: {"pass": true or false, "reason": "one sentence"}."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Judge:
    """An LLM judge: asks `model` whether the output meets `rubric` (see `judge`)."""

    model: Model | str
    rubric: str
    name: str = "judge"
    include_expected: bool = True
    cache: JudgeCache | None = field(default_factory=JudgeCache, compare=False)
    """Verdicts already given, by question (None: ask the model every time)."""

    @property
    def version(self) -> str:
        """A digest of the model's name, the rubric and the instructions."""
        return _digest([self._model_name, self.rubric, _JUDGE_INSTRUCTIONS, self.include_expected])

    @property
    def _model_name(self) -> str:
        return self.model if isinstance(self.model, str) else self.model.name

    def _prompt(self, ctx: EvalContext) -> str:
        parts = [f"Rubric:\n{self.rubric}", f"Question:\n{ctx.case.input}"]
        if self.include_expected and ctx.case.expected is not None:
            parts.append(f"Reference answer:\n{json.dumps(ctx.case.expected, ensure_ascii=False)}")
        parts.append(f"Answer to grade:\n{ctx.text}")
        return "\n\n".join(parts)

    async def evaluate(self, context: EvalContext) -> Score:
        """Ask the model; an answer that is not the JSON verdict gives an unscored `Score`.

        With a `cache`, a question asked before (same model, rubric and prompt) is answered
        from it: no model call, no cost.
        """
        prompt = self._prompt(context)
        if self.cache is None:
            return await self._ask(prompt, context)
        key = judge_key(self._model_name, _JUDGE_INSTRUCTIONS, self.rubric, prompt)
        async with self.cache.asking(key):
            known = self.cache.get(key)
            if known is not None:
                return _parse_verdict(self.name, json.dumps(known))
            score = await self._ask(prompt, context)
            if score.passed is not None:
                self.cache.put(key, {"pass": score.passed, "reason": score.reason})
            return score

    async def _ask(self, prompt: str, context: EvalContext) -> Score:
        from legato.agent import Agent

        agent = Agent(self.model, instructions=_JUDGE_INSTRUCTIONS, name=self.name, max_steps=1)
        result = await agent.run(prompt, budget=context.budget)
        return replace(_parse_verdict(self.name, result.output), cost=result.cost or 0.0)


def _parse_verdict(name: str, answer: str) -> Score:
    text = answer.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return Score(name=name, passed=None, reason=f"the judge's answer did not parse: {answer!r}")
    verdict = data.get("pass") if isinstance(data, dict) else None  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    if not isinstance(verdict, bool):
        why = f"the judge's answer has no boolean 'pass': {answer!r}"
        return Score(name=name, passed=None, reason=why)
    reason = data.get("reason", "")  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
    return Score(name=name, passed=verdict, value=1.0 if verdict else 0.0, reason=str(reason))  # pyright: ignore[reportUnknownArgumentType]


def judge(
    model: Model | str,
    rubric: str,
    *,
    name: str = "judge",
    cache: JudgeCache | None | Literal["memory"] = "memory",
) -> Judge:
    """An LLM judge on any legato model: passes when the model says the output meets `rubric`.

    Its calls spend from the evaluation's budget. An answer that is not the JSON verdict
    leaves the case unscored for this judge, with the answer as the reason. A question
    asked again (same model, rubric and prompt) is answered from `cache`: by default one
    in memory for this judge; a `JudgeCache(path)` keeps verdicts in a file across
    processes; None asks every time.
    """
    chosen = JudgeCache() if cache == "memory" else cache
    return Judge(model=model, rubric=rubric, name=name, cache=chosen)
