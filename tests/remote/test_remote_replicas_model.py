"""One model on two real llama_cpp.server processes (the bundled model; one with default flags): an evaluation
spreads its items, keeps each item on one server, loses nothing and counts nothing twice when a server is killed in
the middle, and the killed server gets work again once it is back."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from app.eval.plan import WorkflowSource, make_plan
from app.eval.results import summarize
from app.eval.runner import Evaluation
from app.eval.store import EvalStore
from app.run.scheduler import SUCCEEDED, Scheduler
from app.traces.store import TraceStore
from app.workflow.model_specs import model_spec_from_dict
from app.workflow.spec import load_workflow_text
from backends.remote import openai_replicas
from backends.remote.openai_replicas import ReplicaBackend
from nodes.registry import default_registry
from tests.remote.conftest import KEY_ENV, MODEL, LlamaServer, start_llama_server

pytestmark = pytest.mark.model
ITEMS = 6
SAMPLES = 2
WF = """version: 1
name: replicas-real
models:
  main: {{source: openai, base_url: {urls}, model: {model}, api_key_env: {key}, timeout_s: 120}}
inputs:
  question: {{type: text, default: "What is 1 + 1?"}}
nodes:
- id: think
  kind: sampler
  model: main
  params: {{prompt: "{{question}} Answer with a number.", n: {n}, temperature: 0.7, max_tokens: 6,
           extract: last_number, normalize: number}}
  inputs: {{question: inputs.question}}
- id: vote
  kind: voter
  params: {{method: majority, extract: last_number, normalize: number}}
  inputs: {{candidates: think.candidates}}
outputs: {{answer: vote.answer}}
"""


@pytest.fixture(scope="module")
def two_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[LlamaServer]]:
    pytest.importorskip("sse_starlette", reason="llama-cpp-python[server] is not installed (pip install -e .[dev])")
    # the second as a user starts it (it cuts a stream when another request arrives), the first keeps streams whole
    started = [start_llama_server(tmp_path_factory.mktemp(f"replica{i}"), default_flags=i == 1) for i in range(2)]
    yield started
    for s in started:
        s.stop()


def test_a_real_evaluation_survives_a_killed_server_and_the_server_gets_work_when_back(llama_provide: Any,
        two_servers: list[LlamaServer], tmp_path: Path, fresh_caps: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_replicas, "REPROBE_FIRST_S", 0.2)
    urls = [{"url": s.base_url, "max_concurrency": 2} for s in two_servers]
    text = WF.format(urls=json.dumps(urls), model=MODEL, key=KEY_ENV, n=SAMPLES)
    wf_path = tmp_path / "wf.yaml"
    wf_path.write_text(text, encoding="utf-8")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n"
                            for i in range(ITEMS)), encoding="utf-8")
    registry = default_registry()
    plan = make_plan([WorkflowSource(path=wf_path)], data, registry=registry, metric="number")
    scheduler = Scheduler(registry, llama_provide)
    backend = scheduler.provider(model_spec_from_dict(load_workflow_text(text).models["main"]))
    assert isinstance(backend, ReplicaBackend)
    killed = threading.Event()
    placed: list[tuple[int, str]] = []  # (run, server) of every request
    choose = ReplicaBackend._choose

    def spy(self: ReplicaBackend, cancel: Any, tried: set[int]) -> Any:
        chosen = choose(self, cancel, tried)
        if chosen is not None and cancel is not None:
            placed.append((id(cancel), chosen.url))
        return chosen

    monkeypatch.setattr(ReplicaBackend, "_choose", spy)

    def during(progress: Any) -> None:
        if progress.done >= 2 and not killed.is_set():
            killed.set()
            two_servers[1].process.kill()

    traces = TraceStore(tmp_path / "traces.db")
    store = EvalStore(traces.engine)
    evaluation = Evaluation(plan, scheduler, store, observers=[traces], on_progress=during)
    assert evaluation.concurrency == 4, "the sum of the servers' max_concurrency"
    assert evaluation.run() == SUCCEEDED, evaluation.error
    summary = summarize(store.get(evaluation.eval_id))
    record = store.get(evaluation.eval_id)
    traces.close()
    (point,) = summary["points"]
    assert killed.is_set() and point["total"] == ITEMS and point["failed"] == 0, "no item lost"
    rows = backend.servers()
    assert not rows[1]["up"] and rows[0]["up"] and rows[1]["served"] > 0, rows
    runs: dict[int, list[str]] = {}
    for run, url in placed:
        if not runs.get(run) or runs[run][-1] != url:
            runs.setdefault(run, []).append(url)
    assert len(runs) == ITEMS and {u for r in runs.values() for u in r} == {s.base_url for s in two_servers}
    for sequence in runs.values():  # one server per item; an item on the killed server moved once, to the other
        assert sequence in ([u] for u in (two_servers[0].base_url, two_servers[1].base_url)) or \
            sequence == [two_servers[1].base_url, two_servers[0].base_url], sequence
    caps = [r.backend.caps for r in backend.replicas]
    assert [c.interrupts_streams for c in caps] == [False, True], "capabilities probed per server"
    per_item = 1 if caps[0].n else SAMPLES
    assert sum(summary["servers"].values()) == ITEMS * per_item, "each answered request counted once"
    assert {item["lm_calls"] for item in record["items"]} == {SAMPLES}, "no item's samples counted twice"
    assert point["completion_tokens"] <= ITEMS * SAMPLES * 6

    # the killed server starts again on its port: it is probed, put back and gets new runs
    two_servers[1] = start_llama_server(tmp_path / "again", default_flags=True, port=two_servers[1].port)
    before = backend.served()[two_servers[1].base_url]
    wf = load_workflow_text(text)
    for i in range(8):
        result = scheduler.run(wf, {"question": f"What is {i} + 2?"}, seed=i)
        assert result.status == SUCCEEDED, result.error
        if backend.served()[two_servers[1].base_url] > before:
            break
        threading.Event().wait(0.3)
    assert backend.served()[two_servers[1].base_url] > before, backend.servers()
