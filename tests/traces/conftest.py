"""Fixtures of the trace store tests: a self-consistency workflow and a way to run it on the fake backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.workflow.spec import Workflow, load_workflow_text
from nodes.registry import default_registry

SELF_CONSISTENCY = """\
version: 1
name: sc-fake
inputs:
  question: {type: text, default: "What is 17 + 25?"}
nodes:
  - id: think
    kind: sampler
    params: {n: 6, temperature: 0.7, max_tokens: 40, logprobs: true,
             prompt: "{question}\\nThink step by step, then write 'Answer: <number>'."}
    inputs: {question: inputs.question}
  - id: vote
    kind: voter
    params: {method: majority, extract: regex, pattern: "Answer:\\\\s*(-?\\\\d+)"}
    inputs: {candidates: think.candidates}
outputs:
  answer: vote.answer
"""

REPLIES = ["17 plus 25 is 42. Answer: 42", "I add them. Answer: 42", "Hmm. Answer: 41",
           "25 + 17 = 42 Answer: 42", "no idea", "Answer: 43"]


@pytest.fixture
def sc_yaml() -> str:
    return SELF_CONSISTENCY


@pytest.fixture
def sc_workflow() -> Workflow:
    return load_workflow_text(SELF_CONSISTENCY)


def reply_by_seed(prompt: str, seed: int) -> str:
    return REPLIES[seed % len(REPLIES)]


@pytest.fixture
def make_scheduler() -> Callable[..., Scheduler]:
    """make_scheduler(latency_s=0.0): a scheduler with every node kind on a fake backend whose samples
    answer 42, 42, 41, 42, (none), 43 by seed."""

    def make(latency_s: float = 0.0) -> Scheduler:
        return Scheduler(default_registry(), fake_provider(reply_fn=reply_by_seed, latency_s=latency_s))

    return make


@pytest.fixture
def store(tmp_path: Path) -> Iterator[TraceStore]:
    s = TraceStore(tmp_path / "traces.db")
    yield s
    s.close()
