"""Fixtures of the visualisation tests: traces of every example workflow, run on the fake backend."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.platform.resources import examples_dir
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.workflow.spec import load_workflow, load_workflow_text
from nodes.registry import default_registry

EXAMPLES = sorted(examples_dir().glob("*.yaml"))

WITH_LOGPROBS = """\
version: 1
name: sc-logprobs
inputs:
  question: {type: text, default: "What is 17 + 25?"}
nodes:
  - id: think
    kind: sampler
    params: {n: 5, logprobs: true, prompt: "{question}"}
    inputs: {question: inputs.question}
  - id: vote
    kind: voter
    params: {method: majority, extract: last_number}
    inputs: {candidates: think.candidates}
outputs:
  answer: vote.answer
"""

REPLIES = ["So the answer is 42", "I think 42", "maybe 41", "it is 42", "no idea at all"]


def reply_by_seed(prompt: str, seed: int) -> str:
    return REPLIES[seed % len(REPLIES)]


@pytest.fixture(scope="session")
def trace_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    store = TraceStore(tmp_path_factory.mktemp("viz") / "traces.db")
    yield store
    store.close()


@pytest.fixture(scope="session")
def example_records(trace_store: TraceStore) -> dict[str, dict[str, Any]]:
    """Example file stem -> record of its run on the fake backend."""
    scheduler = Scheduler(default_registry(), fake_provider(reply_fn=reply_by_seed))
    records = {}
    for path in EXAMPLES:
        result = scheduler.run(load_workflow(path), observers=[trace_store])
        records[path.stem] = trace_store.get_run(result.run_id)
    return records


@pytest.fixture(scope="session")
def logprob_records(trace_store: TraceStore) -> list[dict[str, Any]]:
    """Two runs (seeds 0 and 1) of a sampler that records per-token log-probabilities."""
    scheduler = Scheduler(default_registry(), fake_provider(reply_fn=reply_by_seed))
    wf = load_workflow_text(WITH_LOGPROBS)
    return [trace_store.get_run(scheduler.run(wf, seed=seed, observers=[trace_store]).run_id) for seed in (0, 1)]


def example_names() -> list[str]:
    return [p.stem for p in EXAMPLES]


def repo_path(*parts: str) -> Path:
    return Path(__file__).resolve().parents[2].joinpath(*parts)
