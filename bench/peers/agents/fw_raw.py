"""The raw `openai` SDK: the same two calls and one tool call, written by hand."""

# isort: skip_file
# (the driver is imported first: its clock measures the framework's import)
from __future__ import annotations

import time

import _common

from typing import Any

import openai

IMPORTED = time.perf_counter()

TOOLS = _common.WIRE_TOOLS


def _read_stream(chunks: Any) -> tuple[str, str, str]:
    text, args, call_id = "", "", ""
    for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                call_id = tc.id or call_id
                args += (tc.function.arguments or "") if tc.function else ""
    return text, args, call_id


async def _aread_stream(chunks: Any) -> tuple[str, str, str]:
    text, args, call_id = "", "", ""
    async for chunk in chunks:
        for choice in chunk.choices:
            text += choice.delta.content or ""
            for tc in choice.delta.tool_calls or ():
                call_id = tc.id or call_id
                args += (tc.function.arguments or "") if tc.function else ""
    return text, args, call_id


class Raw(_common.Adapter):
    """`OpenAI` for the blocking modes, `AsyncOpenAI` for the awaited ones."""

    name = "raw"

    def model(self, url: str, streamed: bool = False) -> Any:
        return {"url": url, "sync": None, "async": None}

    def agent(self, model: Any) -> Any:
        return model  # the raw SDK has no agent object: the client and the tool list

    def _sync(self, agent: Any) -> openai.OpenAI:
        if agent["sync"] is None:
            agent["sync"] = openai.OpenAI(base_url=agent["url"], api_key="sk-bench", max_retries=0)
        return agent["sync"]

    def _async(self, agent: Any) -> openai.AsyncOpenAI:
        if agent["async"] is None:
            agent["async"] = openai.AsyncOpenAI(
                base_url=agent["url"], api_key="sk-bench", max_retries=0
            )
        return agent["async"]

    def run_sync(self, agent: Any, text: str) -> Any:
        client = self._sync(agent)
        msgs: list[Any] = [{"role": "user", "content": text}]
        r = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS)
        m = r.choices[0].message
        tc: Any = (m.tool_calls or [])[0]
        follow = _common.follow_up(text, m.content, tc.id, tc.function.arguments)
        r2 = client.chat.completions.create(model="gpt-4o", messages=follow, tools=TOOLS)
        return follow, r2  # the conversation and the last response: the session kept

    async def run_async(self, agent: Any, text: str) -> Any:
        client = self._async(agent)
        msgs: list[Any] = [{"role": "user", "content": text}]
        r = await client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS)
        m = r.choices[0].message
        tc: Any = (m.tool_calls or [])[0]
        follow = _common.follow_up(text, m.content, tc.id, tc.function.arguments)
        r2 = await client.chat.completions.create(model="gpt-4o", messages=follow, tools=TOOLS)
        return follow, r2

    def stream_sync(self, agent: Any, text: str) -> Any:
        client = self._sync(agent)
        opts: Any = {"stream": True, "stream_options": {"include_usage": True}}
        msgs: list[Any] = [{"role": "user", "content": text}]
        first = client.chat.completions.create(model="gpt-4o", messages=msgs, tools=TOOLS, **opts)
        content, args, call_id = _read_stream(first)
        follow = _common.follow_up(text, content, call_id, args)
        second = client.chat.completions.create(
            model="gpt-4o", messages=follow, tools=TOOLS, **opts
        )
        return _read_stream(second)[0]

    async def stream_async(self, agent: Any, text: str) -> Any:
        client = self._async(agent)
        opts: Any = {"stream": True, "stream_options": {"include_usage": True}}
        msgs: list[Any] = [{"role": "user", "content": text}]
        first = await client.chat.completions.create(
            model="gpt-4o", messages=msgs, tools=TOOLS, **opts
        )
        content, args, call_id = await _aread_stream(first)
        follow = _common.follow_up(text, content, call_id, args)
        second = await client.chat.completions.create(
            model="gpt-4o", messages=follow, tools=TOOLS, **opts
        )
        return (await _aread_stream(second))[0]

    def answer(self, result: Any) -> str:
        if isinstance(result, tuple):
            _, response = result
            return str(response.choices[0].message.content)
        return str(result)

    async def aclose(self, model: Any) -> None:
        if model["async"] is not None:
            await model["async"].close()


if __name__ == "__main__":
    _common.main(Raw(), IMPORTED)
