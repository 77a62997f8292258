"""The `openai` SDK's send path alone: what any framework that sends through the SDK pays.

The same two calls and one tool call as `fw_raw.py`, but each answer is taken back as the
HTTP response itself (`client.post(..., cast_to=httpx2.Response)`, the SDK's documented way to
undocumented answers) and read with `json.loads`: no `ChatCompletion` or chunk objects. The
request is still built, authenticated, sent and checked for status errors by the SDK, as
legato's is. The async client is on the SDK's aiohttp transport when `openai[aiohttp]` is
installed (as legato's is); the sync client is the SDK's default. Not a peer: a bound. A
framework that keeps the SDK for the request cannot spend less than this per run.
"""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx2
import openai

IMPORTED = time.perf_counter()

TOOLS = _common.WIRE_TOOLS
STREAMED: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}


def _body(messages: list[Any], streamed: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "gpt-4o", "messages": messages, "tools": TOOLS}
    return {**body, **STREAMED} if streamed else body


def _call(answer: dict[str, Any]) -> tuple[str, str, str]:
    message = answer["choices"][0]["message"]
    tc = message["tool_calls"][0]
    return message.get("content") or "", tc["function"]["arguments"], tc["id"]


def _chunk(line: str, acc: list[str]) -> None:
    """Fold one SSE line into [text, arguments, call id]."""
    if not line.startswith("data:"):
        return
    data = line[5:].strip()
    if data == "[DONE]":
        return
    for choice in json.loads(data).get("choices") or ():
        delta = choice.get("delta") or {}
        acc[0] += delta.get("content") or ""
        for tc in delta.get("tool_calls") or ():
            acc[2] = tc.get("id") or acc[2]
            acc[1] += (tc.get("function") or {}).get("arguments") or ""


def _read(lines: Iterator[str]) -> tuple[str, str, str]:
    acc = ["", "", ""]
    for line in lines:
        _chunk(line, acc)
    return acc[0], acc[1], acc[2]


async def _aread(lines: AsyncIterator[str]) -> tuple[str, str, str]:
    acc = ["", "", ""]
    async for line in lines:
        _chunk(line, acc)
    return acc[0], acc[1], acc[2]


class SdkSend(_common.Adapter):
    """`OpenAI` for the blocking modes, `AsyncOpenAI` (aiohttp when installed) for the others."""

    name = "sdk_send"

    def model(self, url: str, streamed: bool = False) -> Any:
        return {"url": url, "sync": None, "async": None}

    def agent(self, model: Any) -> Any:
        return model

    def _sync(self, agent: Any) -> openai.OpenAI:
        if agent["sync"] is None:
            agent["sync"] = openai.OpenAI(base_url=agent["url"], api_key="sk-bench", max_retries=0)
        return agent["sync"]

    def _async(self, agent: Any) -> openai.AsyncOpenAI:
        if agent["async"] is None:
            try:
                http: Any = openai.DefaultAioHttpClient()
            except RuntimeError:  # the extra is not installed: the SDK's default client
                http = None
            agent["async"] = openai.AsyncOpenAI(
                base_url=agent["url"], api_key="sk-bench", max_retries=0, http_client=http
            )
        return agent["async"]

    def run_sync(self, agent: Any, text: str) -> Any:
        client = self._sync(agent)
        post = client.post
        first = post(
            "/chat/completions",
            body=_body([{"role": "user", "content": text}], False),
            cast_to=httpx2.Response,
        )
        content, args, call_id = _call(json.loads(first.content))
        follow = _common.follow_up(text, content, call_id, args)
        second = post("/chat/completions", body=_body(follow, False), cast_to=httpx2.Response)
        return follow, json.loads(second.content)

    async def run_async(self, agent: Any, text: str) -> Any:
        client = self._async(agent)
        first = await client.post(
            "/chat/completions",
            body=_body([{"role": "user", "content": text}], False),
            cast_to=httpx2.Response,
        )
        content, args, call_id = _call(json.loads(first.content))
        follow = _common.follow_up(text, content, call_id, args)
        second = await client.post(
            "/chat/completions", body=_body(follow, False), cast_to=httpx2.Response
        )
        return follow, json.loads(second.content)

    def stream_sync(self, agent: Any, text: str) -> Any:
        client = self._sync(agent)
        msgs: list[Any] = [{"role": "user", "content": text}]
        first = client.post(
            "/chat/completions", body=_body(msgs, True), cast_to=httpx2.Response, stream=True
        )
        try:
            content, args, call_id = _read(first.iter_lines())
        finally:
            first.close()
        follow = _common.follow_up(text, content, call_id, args)
        second = client.post(
            "/chat/completions", body=_body(follow, True), cast_to=httpx2.Response, stream=True
        )
        try:
            return _read(second.iter_lines())[0]
        finally:
            second.close()

    async def stream_async(self, agent: Any, text: str) -> Any:
        client = self._async(agent)
        msgs: list[Any] = [{"role": "user", "content": text}]
        first = await client.post(
            "/chat/completions", body=_body(msgs, True), cast_to=httpx2.Response, stream=True
        )
        try:
            content, args, call_id = await _aread(first.aiter_lines())
        finally:
            await first.aclose()
        follow = _common.follow_up(text, content, call_id, args)
        second = await client.post(
            "/chat/completions", body=_body(follow, True), cast_to=httpx2.Response, stream=True
        )
        try:
            return (await _aread(second.aiter_lines()))[0]
        finally:
            await second.aclose()

    def answer(self, result: Any) -> str:
        if isinstance(result, tuple):
            _, response = result
            return str(response["choices"][0]["message"]["content"])
        return str(result)

    async def aclose(self, model: Any) -> None:
        if model["async"] is not None:
            await model["async"].close()


if __name__ == "__main__":
    _common.main(SdkSend(), IMPORTED)
