"""Share mode's gaps of round 3: evaluations in the run gate and the per-visitor limit, visitor identities without
a session, the owner's model settings and every sweep point checked for evaluations, prefix-cache hits not reported
across visitors, and the one remote-server consent check on every path from the browser."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from app.run.scheduler import Scheduler
from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.share.visitors import ADDRESS_PREFIX, VisitorIdentities
from app.ui import editor_page
from app.ui.endpoints import endpoint
from app.workflow.spec import load_workflow_text
from backends.base import GenerateResult
from backends.fake import FakeBackend
from nodes.registry import default_registry

WF_YAML = """version: 1
name: gaps
inputs:
  question: {type: text, default: 'What is 1 + 1'}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""
WF_JSON = load_workflow_text(WF_YAML).to_dict()
REMOTE_YAML = WF_YAML.replace("nodes:\n", "models:\n  main: {source: openai, base_url: 'http://203.0.113.9:8080/v1', "
                              "model: m, api_key_env: SOME_SECRET}\nnodes:\n", 1).replace(
    "  kind: generator\n", "  kind: generator\n  model: main\n", 1)
ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"}]


class Gate:
    """A fake model that holds every request until `release` is set (runs stay unfinished)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.specs: list[Any] = []
        self.backend = FakeBackend(reply_fn=self._reply)

    def _reply(self, _prompt: str, _seed: int) -> str:
        self.release.wait(20)
        return "2"

    def provider(self, spec: Any) -> FakeBackend:
        self.specs.append(spec)
        return self.backend


@pytest.fixture
def gate() -> Iterator[Gate]:
    g = Gate()
    yield g
    g.release.set()


def _service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Gate, *, share: bool = True,
             **caps: Any) -> StudioService:
    datasets = tmp_path / "datasets"
    datasets.mkdir(exist_ok=True)
    (datasets / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    monkeypatch.setenv("METAGEN_DATASETS", str(datasets))
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    policy = (SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models, **caps) if share
              else SharePolicy.local())
    return StudioService(policy=policy, provider=gate.provider, dry_run=True, workflows_dir=tmp_path / "wf",
                         examples_dir=tmp_path / "no-examples", models_dir=models, trace_db=tmp_path / "traces.db")


def _request(yaml_text: str = WF_YAML, **extra: Any) -> dict[str, Any]:
    return {"workflows": [{"name": "gaps", "yaml": yaml_text, **extra.pop("source", {})}], "dataset": "qa.jsonl",
            "metric": "exact", **extra}


def _wait(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _from(host: str, session: str | None = None) -> Any:
    return SimpleNamespace(client=SimpleNamespace(host=host), headers={}, **({"session_hash": session} if session
                                                                            else {}))


# ---------------------------------------------------------------------- evaluations: gate and per-visitor limit


def test_an_evaluation_counts_against_the_visitors_run_limit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             gate: Gate) -> None:
    service = _service(tmp_path, monkeypatch, gate, max_concurrent_runs=4)
    for _ in range(2):
        service.start_run(WF_JSON, visitor="alice")
    with pytest.raises(UserError, match="limit is 2"):
        service.evaluations.start(_request(), visitor="alice")
    started = service.evaluations.start(_request(), visitor="bob")  # bob has room
    assert started["running"]
    with pytest.raises(UserError, match="limit is 2"):  # bob: one evaluation and one run are his two
        service.start_run(WF_JSON, visitor="bob")
        service.start_run(WF_JSON, visitor="bob")
    gate.release.set()
    service.close()


def test_a_visitors_evaluation_waits_in_the_run_gate_and_holds_one_slot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    service = _service(tmp_path, monkeypatch, gate, max_concurrent_runs=1, max_queue=1)
    first = service.start_run(WF_JSON, visitor="alice")
    _wait(lambda: service.run_gate.running == 1)
    evaluation = service.evaluations.start(_request(), visitor="bob")
    _wait(lambda: service.run_gate.waiting == 1)  # bob's evaluation queues behind alice's run
    assert service.evaluations.status(evaluation["eval_id"], visitor="bob")["done"] == 0
    with pytest.raises(UserError, match="busy"):  # the queue (1) is full: refused as a run would be
        service.evaluations.start(_request(), visitor="carol")
    gate.release.set()
    service.wait_run(first["run_id"], timeout=20, visitor="alice")
    _wait(lambda: not service.evaluations.status(evaluation["eval_id"], visitor="bob")["running"])
    assert service.evaluations.status(evaluation["eval_id"], visitor="bob")["done"] == len(ROWS)
    service.close()


# ---------------------------------------------------------------------- visitor identities


def test_a_call_without_a_session_is_the_same_visitor_every_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 gate: Gate) -> None:
    service = _service(tmp_path, monkeypatch, gate, max_concurrent_runs=4)
    run = endpoint(editor_page.mg_run, service)
    for _ in range(2):
        assert run({"workflow": WF_JSON}, request=_from("203.0.113.7")).get("error") is None
    refused = run({"workflow": WF_JSON}, request=_from("203.0.113.7"))
    assert "limit is 2" in refused["error"]  # dropping the session does not dodge the per-visitor limit
    assert run({"workflow": WF_JSON}, request=_from("198.51.100.1")).get("error") is None  # another address
    gate.release.set()
    service.close()


def test_sessions_one_address_can_mint_are_bounded() -> None:
    ids = VisitorIdentities(max_per_address=3)
    got = [ids.identify(f"s{i}", "203.0.113.7") for i in range(10)]
    assert got[:3] == ["s0", "s1", "s2"]
    assert set(got[3:]) == {ADDRESS_PREFIX + "203.0.113.7"}  # the rest share their address's identity
    assert ids.identify("s1", "203.0.113.7") == "s1"  # a known session stays itself
    assert ids.identify("s9", "198.51.100.1") == "s9"  # other addresses have their own bound
    assert ids.identify(ADDRESS_PREFIX + "198.51.100.1", "203.0.113.7") == ADDRESS_PREFIX + "203.0.113.7"
    assert ids.identify(None, None) == ADDRESS_PREFIX + "unknown"
    assert ids.sessions_of("203.0.113.7") == 3


def test_idle_sessions_free_their_place() -> None:
    ids = VisitorIdentities(max_per_address=1, idle_s=10)
    assert ids.identify("old", "a", now=0.0) == "old"
    assert ids.identify("new", "a", now=5.0) == ADDRESS_PREFIX + "a"
    assert ids.identify("new", "a", now=20.0) == "new"


def test_sessions_behind_the_share_tunnel_are_told_apart_by_forwarded_address(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    from app.ui.endpoints import client_address

    tunnel = SimpleNamespace(client=SimpleNamespace(host="127.0.0.1"), headers={"x-forwarded-for": "1.2.3.4, 5.6.7.8"})
    assert client_address(tunnel) == "5.6.7.8"
    direct = SimpleNamespace(client=SimpleNamespace(host="9.9.9.9"), headers={"x-forwarded-for": "1.2.3.4"})
    assert client_address(direct) == "9.9.9.9"  # only a proxy on this machine is believed


# ---------------------------------------------------------------------- evaluations follow the share rules


def test_evaluations_run_with_the_owners_model_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        gate: Gate) -> None:
    service = _service(tmp_path, monkeypatch, gate)
    aliases = WF_YAML.replace("nodes:\n", "models:\n  main: {source: bundled, n_ctx: 6000, threads: 2}\nnodes:\n", 1)
    plan = service.evaluations.plan(_request(aliases), visitor="alice")
    for w in plan.workflows:
        for variant in (w.workflow, *w.variants):
            assert variant.models["main"] == {"source": "bundled"}  # one shared copy of each model file
    assert "n_ctx" not in plan.config()["workflows"][0]["yaml"]


def test_every_sweep_point_passes_the_share_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   gate: Gate) -> None:
    service = _service(tmp_path, monkeypatch, gate)
    verified = WF_YAML.replace("outputs:", "- id: v\n  kind: verifier\n  params: {method: length}\n"
                               "  inputs: {candidates: answer.candidates}\noutputs:", 1)
    assert load_workflow_text(verified).node("v") is not None
    with pytest.raises(UserError, match="python verifier is disabled"):
        service.evaluations.plan(_request(verified, sweeps=["v.method=length,python"]), visitor="alice")


# ---------------------------------------------------------------------- prefix-cache hits


class CachingFake(FakeBackend):
    """Reports all but one prompt token as found in the prefix cache, as llama.cpp does for a repeated prompt."""

    def generate(self, *args: Any, **kwargs: Any) -> GenerateResult:
        result = super().generate(*args, **kwargs)
        u = result.usage
        u.prompt_tokens_cached, u.prompt_tokens_evaluated = u.prompt_tokens - 1, 1
        return result


@pytest.mark.parametrize("hide", [False, True])
def test_prefix_cache_hits_are_not_reported_when_hidden(hide: bool) -> None:
    backend = CachingFake(replies=["2"])
    scheduler = Scheduler(default_registry(), lambda spec: backend)
    events: list[Any] = []
    observer = SimpleNamespace(on_event=events.append)
    result = scheduler.run(load_workflow_text(WF_YAML.replace("What is 1 + 1", "my PIN is 4711 ok")),
                           hide_cache_hits=hide, observers=[observer])
    calls = [e.data for e in events if e.type == "lm_call"]
    assert calls and result.stats.prompt_tokens > 1
    if hide:
        assert result.stats.prompt_tokens_cached == 0 and all(c["prompt_tokens_cached"] == 0 for c in calls)
        assert result.stats.prompt_tokens_evaluated == result.stats.prompt_tokens  # charged as if evaluated
    else:
        assert result.stats.prompt_tokens_cached == result.stats.prompt_tokens - 1


def test_share_mode_hides_prefix_cache_hits(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    assert _service(tmp_path, monkeypatch, gate).scheduler.hide_cache_hits
    assert not _service(tmp_path, monkeypatch, gate, share=False).scheduler.hide_cache_hits


# ---------------------------------------------------------------------- consent to remote servers, per path


def test_estimate_and_evaluate_of_a_link_workflow_ask_before_reaching_a_remote_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, gate: Gate) -> None:
    """The Evaluate tab's Estimate sent requests (with the key from the environment) to a link's server."""
    service = _service(tmp_path, monkeypatch, gate, share=False)
    editor = {"source": {"origin": "editor"}}
    for path in (service.evaluations.estimate, service.evaluations.start):
        with pytest.raises(UserError, match=r"203\.0\.113\.9.*SOME_SECRET"):
            path(_request(REMOTE_YAML, **dict(editor)), visitor="owner")
    assert gate.specs == []  # no backend was made: nothing reached the server
    run = endpoint(editor_page.mg_run, service)
    wf = load_workflow_text(REMOTE_YAML).to_dict()
    asked = run({"workflow": wf, "origin": "link"}, request=_from("127.0.0.1", "owner"))
    assert asked["needs_confirmation"] and asked["remote"][0]["api_key_env"] == "SOME_SECRET"
    assert gate.specs == []
    assert run({"workflow": wf, "origin": "link", "confirmed_python": True},
               request=_from("127.0.0.1", "owner")).get("error") is None
    gate.release.set()
    assert service.evaluations.estimate(_request(REMOTE_YAML, **dict(editor)), visitor="owner")["tasks"] == 2
    with pytest.raises(UserError, match=r"203\.0\.113\.9"):  # agreed by one visitor, not by another
        service.evaluations.estimate(_request(REMOTE_YAML, **dict(editor)), visitor="someone-else")
    service.close()


def test_the_owners_own_workflow_files_need_no_confirmation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            gate: Gate) -> None:
    service = _service(tmp_path, monkeypatch, gate, share=False)
    gate.release.set()
    assert service.evaluations.estimate(_request(REMOTE_YAML), visitor="owner")["tasks"] == 2  # a saved workflow
    service.save_yaml_text("remote", REMOTE_YAML)
    opened = endpoint(editor_page.mg_open, service)({"name": "remote"}, request=_from("127.0.0.1", "tab"))
    assert opened.get("error") is None  # opening the owner's file agrees to its servers for this browser
    assert service.evaluations.estimate(_request(REMOTE_YAML, source={"origin": "editor"}), visitor="tab")
    service.close()


@pytest.mark.parametrize(("remote", "cached"), [(False, True), (True, False)])
def test_v1_callers_from_other_machines_see_no_cache_hits(tmp_path: Path, remote: bool, cached: bool) -> None:
    from starlette.applications import Starlette
    from starlette.testclient import TestClient

    from app.serve.config import studio_config
    from app.serve.routes import api_routes

    backend = CachingFake(replies=["2"])
    service = StudioService(policy=SharePolicy.local(), provider=lambda spec: backend, dry_run=True,
                            workflows_dir=tmp_path / "wf", examples_dir=tmp_path / "none", models_dir=tmp_path,
                            trace_db=tmp_path / "t.db")
    service.save_yaml_text("gaps", WF_YAML)
    config = studio_config(service, api_keys=("k",), all_remote=remote)
    client = TestClient(Starlette(routes=api_routes(service, config)), client=("127.0.0.1", 5000))
    headers = {"Authorization": "Bearer k"}
    for model, body in (("gaps", {"messages": [{"role": "user", "content": "my PIN is 4711 ok"}]}),
                        ("bundled", {"messages": [{"role": "user", "content": "my PIN is 4711 ok"}]})):
        answer = client.post("/v1/chat/completions", json={"model": model, **body}, headers=headers)
        assert answer.status_code == 200, answer.text
        usage = answer.json()["usage"]
        assert usage["prompt_tokens"] > 1
        assert (usage["prompt_tokens_details"]["cached_tokens"] > 0) == cached, (model, usage)
    service.close()
