"""Every example workflow runs on a remote server with nothing but a different `models:` entry (llama-cpp-python's own
OpenAI server, a real process; sizes shrunk to keep the test short), traced like any run; the likelihood verifier
works there; and a server that dies mid-run fails the run with a clear message that the trace keeps."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.run import events as ev
from app.run.events import Event
from app.run.providers import llama_provider
from app.run.scheduler import Scheduler
from app.run.status import FAILED, SUCCEEDED
from app.traces.store import TraceStore
from app.workflow.child_files import ChildLoader
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow_text
from nodes.registry import default_registry
from tests.remote.conftest import ROOT, LlamaServer, start_llama_server

pytestmark = pytest.mark.model

EXAMPLES = sorted((ROOT / "workflows").glob("*.yaml"))
SCORE_MESSAGE = "the likelihood verifier (score) needs the logprobs of given text"
LOCAL_ONLY = {
    "deepconf": "needs each token's confidence, which this model's backend does not record",
    "prm_beam": "prm_needs_local_model",
    "beam_rerank": "beam_needs_local_model",
    "diverse_beam": "beam_needs_local_model",
}
"""Examples whose strategy reads what only the local engine records (DeepConf's per-token confidences, a PRM's
probabilities at every step): on a remote server they are refused with these words, before or while running."""
"""What a scoring node says on a server that cannot score (docs/remote.md quotes it)."""
CAPS = {"max_tokens": 24, "n": 3, "batch_size": 2, "min_samples": 2, "max_iters": 1, "max_depth": 2,
        "beam_width": 2, "expand_k": 2, "max_expansions": 3, "particles": 2, "simulations": 2, "population": 2,
        "rounds": 1}
"""Upper bounds on node params, so that every example runs in a few seconds on one CPU thread (the tree searches
took 12-20 s each uncapped: a remote server answers one request at a time)."""

LIKELIHOOD = """version: 1
name: remote-likelihood
inputs:
  question: {type: text, default: 'What is the capital of France?'}
nodes:
- id: sample
  kind: sampler
  params: {prompt: '{question} Answer:', n: 2, temperature: 0.8, max_tokens: 8}
  inputs: {question: inputs.question}
- id: score
  kind: verifier
  params: {method: likelihood}
  inputs: {candidates: sample.candidates}
- id: pick
  kind: voter
  params: {method: best_of_n, extract: full_text, normalize: none}
  inputs: {candidates: score.candidates}
outputs: {answer: pick.best}
"""


def _capped(data: dict[str, Any]) -> dict[str, Any]:
    for node in data.get("nodes") or []:
        params = node.get("params") or {}
        for key, cap in CAPS.items():
            if isinstance(params.get(key), int) and params[key] > cap:
                params[key] = cap
    return data


def remote_workflow(text: str, entry: dict[str, Any]) -> Workflow:
    """The workflow with every model alias on the remote entry and its node params capped by CAPS."""
    data = yaml.safe_load(text)
    data["models"] = {alias: dict(entry) for alias in (data.get("models") or {"main": None})}
    return load_workflow_text(yaml.safe_dump(_capped(data), sort_keys=False))


CAPPED_CHILDREN = ChildLoader(texts={p.stem: yaml.safe_dump(_capped(yaml.safe_load(p.read_text(encoding="utf-8"))),
                                                            sort_keys=False) for p in EXAMPLES})
"""The examples as sub-workflows (judge_of_methods runs three), capped too; they run on the parent's models."""


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TraceStore]:
    trace_store = TraceStore(tmp_path_factory.mktemp("traces") / "traces.db")
    yield trace_store
    trace_store.close()


@pytest.fixture(scope="module")
def scheduler() -> Iterator[Scheduler]:
    provider = llama_provider()
    yield Scheduler(default_registry(), provider)
    provider.close()


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_runs_on_a_remote_server(path: Path, llama_server: LlamaServer, scheduler: Scheduler,
                                               store: TraceStore) -> None:
    wf = remote_workflow(path.read_text(encoding="utf-8"), llama_server.entry())
    if path.stem in LOCAL_ONLY:
        try:
            result = scheduler.run(wf, seed=3, observers=[store])
        except WorkflowError as exc:  # refused at the run's start, before any request
            assert LOCAL_ONLY[path.stem] in str(exc)
            return
        assert result.status == FAILED and LOCAL_ONLY[path.stem] in (result.error or ""), result.error
        return
    # no caches: an earlier example's identical requests (deer_think's thinking phase is thinking_budget's) would
    # answer this one's from the sample cache, and the remote server would see no call of it
    result = scheduler.run(wf, seed=3, observers=[store], use_cache=False, children=CAPPED_CHILDREN)
    assert store.flush()
    record = store.get_run(result.run_id)
    if result.status != SUCCEEDED:  # only a node that needs scoring may fail, and then with the documented words
        assert SCORE_MESSAGE in (result.error or ""), result.error
        return
    assert record["run"]["status"] == SUCCEEDED
    assert result.outputs
    calls = record["lm_calls"]
    assert calls and {c["model"] for c in calls} == {f"openai:{llama_server.base_url}#smol"}
    # samples an earlier example drew with the same prompt and seed come from the sample cache: counted as reused
    assert result.stats.completion_tokens + result.stats.completion_tokens_reused > 0
    assert "remote-test-key" not in str(record)  # the key stays in the environment


def test_the_likelihood_verifier_scores_on_the_remote_server(llama_server: LlamaServer, scheduler: Scheduler,
                                                             store: TraceStore) -> None:
    result = scheduler.run(remote_workflow(LIKELIHOOD, llama_server.entry()), seed=1, observers=[store])
    assert result.status == SUCCEEDED, result.error
    assert store.flush()
    calls = store.get_run(result.run_id)["lm_calls"]
    scored = [c for c in calls if c["purpose"] == "score"]
    assert len(scored) == 2 and all(c["finish_reason"] == "score" for c in scored)


class _KillOnFirstToken:
    """An observer that stops the server as soon as the run streams its first token."""

    def __init__(self, server: LlamaServer) -> None:
        self.server = server
        self.killed = threading.Event()

    def on_event(self, event: Event) -> None:
        if event.type == ev.TOKEN and not self.killed.is_set():
            self.killed.set()
            self.server.process.kill()


def test_a_server_that_dies_mid_run_fails_the_run_clearly(tmp_path: Path, scheduler: Scheduler,
                                                          store: TraceStore) -> None:
    doomed = start_llama_server(tmp_path / "doomed")
    try:
        text = """version: 1
name: doomed
nodes:
- id: story
  kind: generator
  params: {prompt: 'Write a long story about a dragon.', max_tokens: 300, temperature: 0.8}
outputs: {text: story.text}
"""
        killer = _KillOnFirstToken(doomed)
        result = scheduler.run(remote_workflow(text, doomed.entry()), observers=[store, killer])
    finally:
        doomed.stop()
    assert killer.killed.is_set()
    assert result.status == FAILED
    assert "closed the connection in the middle of an answer" in (result.error or "") or \
        "could not connect to" in (result.error or ""), result.error
    assert store.flush()
    run = store.get_run(result.run_id)["run"]
    assert run["status"] == FAILED and doomed.base_url in run["error"]
