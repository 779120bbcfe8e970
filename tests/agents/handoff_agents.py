"""An Agents SDK program with a handoff, run by test_agents_sdk.py in a child process: a triage agent hands off to
the marker agent, which calls its function tool; prints the final output and the agent that gave it."""

from __future__ import annotations

import sys

from agents import Agent, OpenAIResponsesModel, Runner, function_tool, set_tracing_disabled
from openai import AsyncOpenAI


@function_tool
def read_marker() -> str:
    """Read this machine's marker."""
    return "MG-MARKER-" + str(4700 + 11)


def main(base_url: str) -> None:
    set_tracing_disabled(True)
    model = OpenAIResponsesModel(model="bundled", openai_client=AsyncOpenAI(base_url=base_url, api_key="unused"))
    marker = Agent(name="Marker agent", instructions="You keep the marker: read it with your tool.",
                   handoff_description="Knows the marker.", tools=[read_marker], model=model)
    triage = Agent(name="Triage", instructions="Hand off to the agent that can answer.", handoffs=[marker],
                   model=model)
    result = Runner.run_sync(triage, "What is this machine's marker?")
    sys.stdout.write(f"{result.last_agent.name}: {result.final_output}\n")


if __name__ == "__main__":
    main(sys.argv[1])
