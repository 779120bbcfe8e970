"""The OpenAI Agents SDK completes a function-tool round trip against `metagen serve`: docs/agents.md's snippet, run as
written (its server's port aside) on the Responses API and on chat completions, calls its @function_tool when the
scripted model asks, sends the result back, and prints the answer the scripted model made from it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from tests.agents.agent_clients import MARKER, at_port, docs_block, port_of

pytestmark = pytest.mark.agents

SCRIPT = Path(__file__).resolve().parent / "scripts" / "agents_sdk.yaml"
HANDOFF_SCRIPT = Path(__file__).resolve().parent / "scripts" / "agents_sdk_handoff.yaml"
HANDOFF_PROGRAM = Path(__file__).resolve().parent / "handoff_agents.py"
SNIPPET_TIMEOUT_S = 120.0


@pytest.mark.parametrize("model_class", ["OpenAIResponsesModel", "OpenAIChatCompletionsModel"])
def test_a_function_tool_round_trip(scripted_serve, tmp_path: Path, model_class: str) -> None:
    if importlib.util.find_spec("agents") is None:
        pytest.fail("the OpenAI Agents SDK is not installed: it is in the dev extra (pip install -e '.[dev]')",
                    pytrace=False)
    server = scripted_serve(SCRIPT)
    snippet = at_port(docs_block("agents-sdk"), port_of(server.base_url))
    assert "OpenAIResponsesModel(" in snippet
    snippet = snippet.replace("OpenAIResponsesModel", model_class)
    try:
        proc = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, cwd=tmp_path,
                              timeout=SNIPPET_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the Agents SDK snippet did not finish within {SNIPPET_TIMEOUT_S:g}s\nserver log:\n"
                    f"{server.log()[-4000:]}", pytrace=False)
    story = (f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}\n"
             f"server log:\n{server.log()[-4000:]}")
    assert proc.returncode == 0, story
    assert proc.stdout.strip() == f"The tool says {MARKER}", story


def test_a_handoff_arrives_as_a_tool_and_the_agent_handed_to_answers(scripted_serve, tmp_path: Path) -> None:
    if importlib.util.find_spec("agents") is None:
        pytest.fail("the OpenAI Agents SDK is not installed: it is in the dev extra (pip install -e '.[dev]')",
                    pytrace=False)
    server = scripted_serve(HANDOFF_SCRIPT)
    try:
        proc = subprocess.run([sys.executable, str(HANDOFF_PROGRAM), server.base_url], capture_output=True,
                              text=True, cwd=tmp_path, timeout=SNIPPET_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the handoff program did not finish within {SNIPPET_TIMEOUT_S:g}s\nserver log:\n"
                    f"{server.log()[-4000:]}", pytrace=False)
    story = (f"exit {proc.returncode}\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}\n"
             f"server log:\n{server.log()[-4000:]}")
    assert proc.returncode == 0, story
    assert proc.stdout.strip() == f"Marker agent: The tool says {MARKER}", story
