"""One agent, every provider: the same tool-using run through each official SDK, offline.

Run: `python examples/same_agent_every_provider.py`. A local wire simulator plays each
provider (OpenAI Responses and Chat, Anthropic, Gemini, Ollama, a llama.cpp server); the
agent, its tool and its answer are the same on all of them.
"""

from __future__ import annotations

from legato import Agent, tool
from legato.models import Model, ProviderSettings
from legato.models.anthropic import AnthropicModel
from legato.models.gemini import GeminiModel
from legato.models.ollama import OllamaModel
from legato.models.openai_chat import OpenAIChatModel
from legato.models.openai_compatible import compatible_model
from legato.models.openai_responses import OpenAIResponsesModel
from legato.simulator import SimCall, SimTurn, SimUsage, WireSimulator


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: The city's name.
    """
    return {"Paris": "sunny, 24 °C", "Oslo": "snow, -3 °C"}.get(city, "unknown")


def models(url: str) -> list[Model]:
    settings = ProviderSettings(timeout=30)
    return [
        OpenAIResponsesModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-demo", settings=settings),
        OpenAIChatModel("gpt-4o", base_url=f"{url}/v1", api_key="sk-demo", settings=settings),
        AnthropicModel("claude-sonnet-4-6", base_url=url, api_key="sk-demo", settings=settings),
        GeminiModel("gemini-2.5-flash", base_url=url, api_key="demo", settings=settings),
        OllamaModel("qwen3:0.6b", base_url=url, settings=settings),
        compatible_model("llamacpp-server", "smollm2", base_url=f"{url}/v1", settings=settings),
    ]


def main() -> None:
    agent_tools = [get_weather]
    with WireSimulator() as sim:
        for model in models(sim.url):
            sim.enqueue(
                SimTurn(
                    text="Let me check. ",
                    calls=(
                        SimCall(name="get_weather", arguments={"city": "Paris"}),
                        SimCall(name="get_weather", arguments={"city": "Oslo"}),
                    ),
                    usage=SimUsage(input_tokens=1200, output_tokens=40, cached_tokens=1000),
                ),
                SimTurn(text="Paris is sunny; Oslo has snow.", usage=SimUsage(input_tokens=1300)),
            )
            result = Agent(model, tools=agent_tools, instructions="Be brief.").run_sync(
                "Weather in Paris and Oslo?"
            )
            results = [r.text for m in result.messages for r in m.tool_results]
            cost = f"${result.cost:.6f}" if result.cost else "free"
            print(
                f"{model.name:<32} {result.output!r} tools={results} tokens={result.usage.total_tokens} {cost}"
            )
        sim.assert_complete()


if __name__ == "__main__":
    main()
