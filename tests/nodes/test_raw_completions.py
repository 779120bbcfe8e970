"""Raw completions are kept verbatim (a base model continuing a function body indents its first line), and
`echo` makes the candidate the prompt followed by its completion; chat completions are still stripped."""

from __future__ import annotations

from typing import Any

from app.run.providers import fake_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.workflow.spec import workflow_from_dict
from nodes.registry import default_registry

BODY = "    return n % 2 == 0\n"
PROMPT = 'def is_even(n):\n    """True for even n."""\n'


def _run(kind: str, params: dict[str, Any]) -> Any:
    node = {"id": "g", "kind": kind, "params": {"prompt": "{question}", **params}, "inputs": {"question": "inputs.q"}}
    port = "text" if kind == "generator" else "candidates"
    wf = workflow_from_dict({"version": 1, "name": "t", "inputs": {"q": {"type": "text", "default": PROMPT}},
                             "nodes": [node], "outputs": {"out": f"g.{port}"}})
    result = Scheduler(default_registry(), fake_provider(reply_fn=lambda prompt, i: BODY)).run(wf, seed=0)
    assert result.status == SUCCEEDED, result.error
    return result.outputs["out"]


def test_a_raw_generator_keeps_the_completion_verbatim() -> None:
    assert _run("generator", {"mode": "raw"}) == BODY
    assert _run("generator", {"mode": "chat"}) == BODY.strip()


def test_echo_gives_the_whole_program_and_it_compiles() -> None:
    text = _run("generator", {"mode": "raw", "echo": True})
    assert text == PROMPT + BODY
    compile(text, "candidate", "exec")  # the stripped body after the prompt would be an IndentationError


def test_sampler_candidates_are_verbatim_and_echoed_in_raw_mode() -> None:
    out = _run("sampler", {"mode": "raw", "echo": True, "n": 3, "extract": "full_text"})
    assert [c.text for c in out.candidates] == [PROMPT + BODY] * 3
    plain = _run("sampler", {"mode": "raw", "n": 2, "extract": "full_text"})
    assert [c.text for c in plain.candidates] == [BODY] * 2
