"""One model on several servers (`base_url` a list), on stdlib fake servers with a fixed latency: the list's checks,
affinity of a run to its server, spread over servers, failover without losing or double-counting, a server coming
back, and the message when all are down."""

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
from app.run.providers import llama_provider
from app.run.scheduler import SUCCEEDED, Scheduler
from app.traces.store import TraceStore
from app.viz.evaluation import evaluation_report_html
from app.workflow.model_specs import model_spec_from_dict
from app.workflow.spec import load_workflow_text
from backends.base import BackendError, CancelToken, SamplingParams
from backends.remote import openai_replicas
from backends.remote.openai_replicas import ReplicaBackend, _Relay
from nodes.registry import default_registry
from tests.remote.fake_openai import MODEL, FakeOpenAIServer
from tests.remote.test_remote_spec import problems

SAMPLES = 2
WF = """version: 1
name: replicas
models:
  main: {{source: openai, base_url: {urls}, model: {model}, timeout_s: 10}}
inputs:
  question: {{type: text, default: "What is 1 + 1?"}}
nodes:
- id: think
  kind: sampler
  model: main
  params: {{prompt: "{{question}} Answer with a number.", n: {n}, temperature: 0.7, max_tokens: 8,
           extract: last_number, normalize: number}}
  inputs: {{question: inputs.question}}
- id: again
  kind: generator
  model: main
  params: {{prompt: "{{question}} Once more.", max_tokens: 8}}
  inputs: {{question: inputs.question}}
- id: vote
  kind: voter
  params: {{method: majority, extract: last_number, normalize: number}}
  inputs: {{candidates: think.candidates}}
outputs: {{answer: vote.answer, text: again.text}}
"""


@pytest.fixture
def servers() -> Iterator[list[FakeOpenAIServer]]:
    from backends.remote import openai_caps

    openai_caps.forget()
    started = [FakeOpenAIServer(latency_s=0.05).start() for _ in range(2)]
    yield started
    for s in started:
        s.stop()
    openai_caps.forget()


def workflow_yaml(urls: list[Any], n: int = SAMPLES) -> str:
    return WF.format(urls=json.dumps(urls), model=MODEL, n=n)


def evaluate(tmp_path: Path, urls: list[Any], items: int, during: Any = None) -> tuple[dict[str, Any], Scheduler]:
    """An evaluation of `items` questions on the servers; `during(progress)` is called after each item."""
    wf_path = tmp_path / "replicas.yaml"
    wf_path.write_text(workflow_yaml(urls), encoding="utf-8")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"What is item {i}?", "answer": "42"}) + "\n"
                            for i in range(items)), encoding="utf-8")
    registry = default_registry()
    plan = make_plan([WorkflowSource(path=wf_path)], data, registry=registry, metric="number")
    scheduler = Scheduler(registry, llama_provider())
    traces = TraceStore(tmp_path / "traces.db")
    store = EvalStore(traces.engine)
    evaluation = Evaluation(plan, scheduler, store, observers=[traces], on_progress=during)
    assert evaluation.concurrency == 16, "the sum of the servers' concurrency (8 + 8)"
    assert evaluation.run() == SUCCEEDED, evaluation.error
    traces.close()
    return summarize(store.get(evaluation.eval_id)), scheduler


def item_servers(servers: list[FakeOpenAIServer], items: int) -> dict[int, set[int]]:
    """item -> the servers that answered its requests (found by the item's question in their prompts)."""
    return {i: {k for k, s in enumerate(servers) if any(f"item {i}?" in p for p in s.prompts)} for i in range(items)}


# -- the list forms ----------------------------------------------------------------------------------------

def test_a_list_of_urls_and_mappings_makes_one_spec_of_several_servers() -> None:
    spec = model_spec_from_dict({"source": "openai", "model": "m", "max_concurrency": 4, "base_url": [
        "http://a:8000/v1/", {"url": "http://b:8000/v1", "max_concurrency": 16}]})
    assert spec.replicas == (("http://a:8000/v1", None), ("http://b:8000/v1", 16))
    assert spec.base_url == "http://a:8000/v1"
    assert problems("{source: openai, model: m, base_url: ['http://a:1/v1', {url: 'http://b:1/v1', "
                    "max_concurrency: 2}]}") == []


@pytest.mark.parametrize(("urls", "words"), [
    ("[]", "empty base_url list"),
    ("['http://a:1/v1', 'http://b:1/v1', 'b:1/v1']", "base_url[2] 'b:1/v1' is not an http:// or https:// URL"),
    ("['http://a:1/v1', {url: 'http://b:1/v1', model: other}]", "base_url[1] sets its own model 'other'"),
    ("['http://a:1/v1', {url: 'http://b:1/v1', max_concurency: 2}]", "did you mean 'max_concurrency'"),
    ("['http://a:1/v1', {url: 'http://b:1/v1', max_concurrency: 0}]", "base_url[1]: max_concurrency must be"),
    ("['http://a:1/v1', {max_concurrency: 2}]", "base_url[1] None is not an http"),
    ("['http://a:1/v1', 'http://a:1/v1/']", "names http://a:1/v1 twice"),
])
def test_bad_server_lists_say_which_entry_and_how_to_fix_it(urls: str, words: str) -> None:
    found = problems(f"{{source: openai, model: m, base_url: {urls}}}")
    text = " ".join(f"{i.message} {i.hint}" for i in found)
    assert words in text, text
    assert {i.code for i in found} == {"bad_model"}
    with pytest.raises(ValueError, match="base_url"):
        model_spec_from_dict({"source": "openai", "model": "m", "base_url": load_workflow_text(
            WF.format(urls=urls, model="m", n=1)).models["main"]["base_url"]})


# -- routing -------------------------------------------------------------------------------------------------

def test_an_evaluation_spreads_items_keeps_each_on_one_server_and_says_who_served(
        servers: list[FakeOpenAIServer], tmp_path: Path) -> None:
    summary, scheduler = evaluate(tmp_path, [s.base_url for s in servers], items=12)
    (point,) = summary["points"]
    assert point["total"] == 12 and point["failed"] == 0
    by_item = item_servers(servers, 12)
    assert all(len(found) == 1 for found in by_item.values()), by_item  # both nodes of an item on one server
    assert {k for found in by_item.values() for k in found} == {0, 1}, "both servers got items"
    served = summary["servers"]
    assert list(served) == [s.base_url for s in servers]
    generations = [sum(f"item {i}?" in p for i in range(12) for p in s.prompts) for s in servers]
    assert list(served.values()) == generations, "requests served = the generation requests each server saw"
    assert "requests served" in evaluation_report_html(summary)
    from app.cli.eval import _json_result, format_table

    assert _json_result(summary, None)["servers"] == served

    assert f"requests served: {servers[0].base_url} {served[servers[0].base_url]}" in format_table(summary)
    backend = scheduler.provider(model_spec_from_dict(load_workflow_text(workflow_yaml(
        [s.base_url for s in servers])).models["main"]))
    assert isinstance(backend, ReplicaBackend)
    rows = backend.servers()
    assert all(r["up"] and r["outstanding"] == 0 and r["mean_latency_s"] > 0 for r in rows)


def test_a_server_killed_mid_evaluation_loses_no_item_and_counts_nothing_twice(
        servers: list[FakeOpenAIServer], tmp_path: Path) -> None:
    killed = threading.Event()

    def during(progress: Any) -> None:
        if progress.done >= 4 and not killed.is_set():
            killed.set()
            servers[1].stop()

    urls = [s.base_url for s in servers]
    summary, scheduler = evaluate(tmp_path, urls, items=24, during=during)
    (point,) = summary["points"]
    assert killed.is_set()
    rows = scheduler.provider(model_spec_from_dict(load_workflow_text(workflow_yaml(urls)).models["main"])).servers()
    assert rows[1]["failures"] >= 1 and not rows[1]["up"] and rows[1]["served"] > 0, rows
    assert point["total"] == 24 and point["failed"] == 0 and point["correct"] == 24
    # every item: one request of n=2 samples (4 tokens each) and one generation (4 tokens), counted once
    assert point["completion_tokens"] == 24 * (4 * SAMPLES + 4)
    assert sum(summary["servers"].values()) == 24 * 2
    answered = sum(sum(f"item {i}?" in p for p in s.prompts) for s in servers for i in range(24))
    assert answered == 24 * 2, "no request was answered twice"


def test_a_server_that_comes_back_gets_work_and_all_down_names_every_server(
        servers: list[FakeOpenAIServer], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(openai_replicas, "REPROBE_FIRST_S", 0.05)
    from app.workflow.model_specs import replica_servers
    from backends.base import ModelSpec

    urls = [s.base_url for s in servers]
    backend = ReplicaBackend(ModelSpec(source="openai", base_url=urls[0], model=MODEL, timeout_s=5,
                                       replicas=replica_servers(urls)))
    params = SamplingParams(max_tokens=4)
    servers[0].stop()
    for _ in range(4):
        assert backend.generate("q", params, cancel=CancelToken()).completions[0].text == "Answer: 42"
    assert [r["up"] for r in backend.servers()] == [False, True]
    servers[0].start()
    before = servers[0].served
    for _ in range(10):
        backend.generate("q", params, cancel=CancelToken())
        if servers[0].served > before:
            break
        threading.Event().wait(0.05)
    assert servers[0].served > before, "the server that came back got work again"
    assert backend.servers()[0]["up"]
    for s in servers:
        s.stop()
    with pytest.raises(BackendError) as info:
        backend.generate("q", params, cancel=CancelToken())
    assert all(url in str(info.value) for url in urls) and "every server" in str(info.value)
    assert str(info.value).count("Connection refused") == 2
    backend.close()


def test_a_run_stays_on_its_server_and_a_new_run_goes_to_the_least_busy(servers: list[FakeOpenAIServer]) -> None:
    from app.workflow.model_specs import replica_servers
    from backends.base import ModelSpec

    backend = ReplicaBackend(ModelSpec(source="openai", base_url=servers[0].base_url, model=MODEL, timeout_s=5,
                                       replicas=replica_servers([s.base_url for s in servers])))
    run = CancelToken()
    first = backend._pick(run, set())
    assert backend._pick(run, set()) is first, "the run's second request: same server though it is busier"
    other = backend._pick(CancelToken(), set())
    assert other is not first, "a new run goes to the idle server"
    backend.close()


def test_streamed_pieces_are_relayed_once_across_a_failover() -> None:
    got: list[tuple[int, str]] = []
    relay = _Relay(lambda i, piece: got.append((i, piece)))
    first = relay.attempt()
    assert first is not None
    first(0, "a")
    first(0, "b")
    second = relay.attempt()
    assert second is not None
    for piece in ("a", "b", "c"):
        second(0, piece)
    second(1, "x")
    assert got == [(0, "a"), (0, "b"), (0, "c"), (1, "x")]


# -- where a person sees the servers -------------------------------------------------------------------------

def test_models_check_probes_each_server_and_names_the_one_down(
        servers: list[FakeOpenAIServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from app.cli.main import main

    down = FakeOpenAIServer()  # never started: nothing listens on its port
    wf_path = tmp_path / "wf.yaml"
    wf_path.write_text(workflow_yaml([servers[0].base_url, {"url": down.base_url, "max_concurrency": 2}]),
                       encoding="utf-8")
    assert main(["models", "check", str(wf_path), "--json", "--timeout", "5"]) == 1
    found = json.loads(capsys.readouterr().out)
    assert [(f["target"].split(": ", 1)[1], f["base_url"], f["up"]) for f in found] == [
        ("model 'main' server 1/2", servers[0].base_url, True), ("model 'main' server 2/2", down.base_url, False)]
    assert "Connection refused" in found[1]["error"] and found[0]["stream"] is True


def test_the_models_tab_lists_each_server_of_a_model_that_ran(
        servers: list[FakeOpenAIServer], tmp_path: Path) -> None:
    from app.service.studio import StudioService
    from app.ui.remote_check import servers_markdown

    service = StudioService(workflows_dir=tmp_path / "wf", models_dir=tmp_path / "models")
    assert "No model on several servers" in servers_markdown(service.models.remote_servers())
    wf = load_workflow_text(workflow_yaml([s.base_url for s in servers]))
    result = service.scheduler.run(wf, {"question": "What is item 0?"}, seed=1)
    assert result.status == SUCCEEDED, result.error
    rows = service.models.remote_servers()
    assert [r["url"] for r in rows] == [s.base_url for s in servers]
    assert sum(r["served"] for r in rows) == 2 and all(r["up"] for r in rows)
    assert [r["served"] for r in rows] in ([2, 0], [0, 2]), "one run's requests on one server"
    table = servers_markdown(rows)
    assert servers[0].base_url in table and "| up |" in table


def test_a_server_answering_5xx_is_taken_out_and_a_4xx_is_the_request_s_own_error(
        servers: list[FakeOpenAIServer]) -> None:
    from app.workflow.model_specs import replica_servers
    from backends.base import ModelSpec

    backend = ReplicaBackend(ModelSpec(source="openai", base_url=servers[0].base_url, model=MODEL, timeout_s=5,
                                       replicas=replica_servers([s.base_url for s in servers])))
    for replica in backend.replicas:
        _ = replica.backend.caps  # both probed while healthy
    servers[0].status = 500
    for _ in range(3):
        assert backend.generate("q", SamplingParams(max_tokens=4), cancel=CancelToken()).completions
    rows = backend.servers()
    assert not rows[0]["up"] and "500" in rows[0]["error"] and rows[1]["served"] == 3, rows
    servers[1].status = 400
    with pytest.raises(BackendError, match="400") as info:
        backend.generate("q", SamplingParams(max_tokens=4), cancel=CancelToken())
    assert "every server" not in str(info.value)
    assert backend.servers()[1]["up"], "a refused request says nothing about the server's health"
    backend.close()


def test_consent_names_every_server_and_a_shared_app_refuses_a_visitor_s_list() -> None:
    from app.share.policy import SharePolicy, check_workflow_allowed, remote_models

    wf = load_workflow_text(workflow_yaml(["http://a:1/v1", {"url": "http://b:1/v1", "max_concurrency": 2}]))
    assert remote_models(wf)[0]["base_url"] == "http://a:1/v1, http://b:1/v1"
    issues = check_workflow_allowed(wf, SharePolicy(share_mode=True))
    assert [i.code for i in issues] == ["model_source_refused"]


def test_a_resumed_evaluation_adds_to_what_each_server_served_before(tmp_path: Path) -> None:
    traces = TraceStore(tmp_path / "traces.db")
    store = EvalStore(traces.engine)
    store.create("e1", "replicas", {"workflows": []}, {})
    store.finish("e1", "interrupted", servers={"http://a/v1": 2})
    store.finish("e1", SUCCEEDED, servers={"http://a/v1": 1, "http://b/v1": 3})
    assert summarize(store.get("e1"))["servers"] == {"http://a/v1": 3, "http://b/v1": 3}
    traces.close()
