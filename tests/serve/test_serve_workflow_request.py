"""A chat request made into workflow runs: inputs from messages or `inputs`, overrides, graded output, the
caller's rules; API keys and the bind rule."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request

from app.serve.access import check_access
from app.serve.catalog import WorkflowModel, find_model, list_models
from app.serve.config import ServeConfig, bind_problem, load_api_keys, studio_config
from app.serve.errors import ApiError
from app.serve.params import parse_chat
from app.serve.workflow_request import apply_overrides, graded_output, prepare, workflow_inputs
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.share.run_gate import RunGate
from app.workflow.spec import load_workflow
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent / "workflows"


def _wf(path: Path) -> Any:
    return load_workflow(path)


def _chat(**body: Any) -> Any:
    return parse_chat({"model": "x", "messages": [{"role": "user", "content": "What is 6 x 7?"}], **body})


def test_the_last_user_message_fills_the_single_text_input() -> None:
    wf = _wf(ROOT / "workflows" / "chain_of_thought.yaml")
    req = parse_chat({"model": "x", "messages": [{"role": "user", "content": "first"},
                                                  {"role": "assistant", "content": "ok"},
                                                  {"role": "user", "content": "second"}]})
    assert workflow_inputs(wf, "cot", req) == {"question": "second"}


def test_several_inputs_come_from_inputs_and_the_missing_ones_are_named() -> None:
    wf = _wf(HERE / "two_inputs.yaml")
    with pytest.raises(ApiError) as info:
        workflow_inputs(wf, "two_inputs", _chat())
    err = info.value
    assert (err.status, err.param, err.code) == (400, "inputs", "missing_inputs")
    assert err.extra["missing"] == ["question", "style"] and "extra_body" in err.message
    values = workflow_inputs(wf, "two_inputs", _chat(inputs={"question": "q", "style": "haiku"}))
    assert values == {"question": "q", "style": "haiku", "note": ""}
    with pytest.raises(ApiError) as info:
        workflow_inputs(wf, "two_inputs", _chat(inputs={"question": "q", "style": "s", "colour": "red"}))
    assert info.value.code == "unknown_input"


def test_a_demo_default_never_stands_in_for_the_question() -> None:
    wf = _wf(ROOT / "workflows" / "chain_of_thought.yaml")
    with pytest.raises(ApiError) as info:
        workflow_inputs(wf, "cot", parse_chat({"model": "x", "messages": [{"role": "system", "content": "s"}]}))
    assert (info.value.param, info.value.code) == ("messages", "missing_inputs")


def test_overrides_land_on_the_nodes_that_declare_them() -> None:
    registry = default_registry()
    wf = _wf(ROOT / "workflows" / "best_of_n.yaml")
    changed, touched = apply_overrides(wf, registry, {"temperature": 0.2, "max_tokens": None})
    assert touched == {"temperature": ["sample"]}
    assert changed.node("sample").params["temperature"] == 0.2
    assert wf.node("sample").params["temperature"] == 0.8, "the original is left alone"


def test_the_graded_output() -> None:
    registry = default_registry()
    cot = graded_output(_wf(ROOT / "workflows" / "chain_of_thought.yaml"), registry)
    assert (cot.output, cot.node_id, cot.port, cot.streams_tokens) == ("answer", "answer", "text", True)
    vote = graded_output(_wf(ROOT / "workflows" / "self_consistency.yaml"), registry)
    assert vote.node_id == "vote" and not vote.streams_tokens


def _request(client: str = "127.0.0.1", headers: dict[str, str] | None = None) -> Request:
    raw = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    return Request({"type": "http", "method": "GET", "path": "/v1/models", "headers": raw,
                    "client": (client, 5000), "query_string": b""})


def test_who_may_call_and_which_rules_apply(tmp_path: Path) -> None:
    local = SharePolicy.local()
    remote = SharePolicy.for_serving(force_share_mode=True, models_folder=tmp_path)
    open_config = ServeConfig(remote_policy=remote, gate=RunGate(1, 1))
    assert not check_access(_request(), open_config, local).share_rules
    for request in (_request("10.0.0.5"), _request(headers={"X-Forwarded-For": "1.2.3.4"})):
        with pytest.raises(ApiError) as info:
            check_access(request, open_config, local)
        assert info.value.status == 401 and "--api-key" in info.value.message
    keyed = ServeConfig(remote_policy=remote, gate=RunGate(1, 1), api_keys=("k1",))
    with pytest.raises(ApiError) as info:
        check_access(_request(), keyed, local)
    assert info.value.code == "missing_api_key"
    with pytest.raises(ApiError) as info:
        check_access(_request(headers={"Authorization": "Bearer nope"}), keyed, local)
    assert info.value.code == "invalid_api_key"
    caller = check_access(_request("10.0.0.5", {"Authorization": "Bearer k1"}), keyed, local)
    assert caller.remote and caller.share_rules
    forced = ServeConfig(remote_policy=remote, gate=RunGate(1, 1), share_rules_everywhere=True)
    assert check_access(_request(), forced, local).share_rules


def test_api_keys_and_the_bind_rule(tmp_path: Path) -> None:
    keys = tmp_path / "keys"
    keys.write_text("# team keys\nalpha\n\nbeta\n")
    assert load_api_keys(key_file=keys, environ={}) == ("alpha", "beta")
    assert load_api_keys(environ={"METAGEN_API_KEY": "env"}) == ("env",)
    assert load_api_keys("given", environ={"METAGEN_API_KEY": "env"}) == ("given",)
    for bad in ({"key": " "}, {"key_file": tmp_path / "missing"}):
        with pytest.raises(ValueError):
            load_api_keys(**bad, environ={})
    assert bind_problem("127.0.0.1", ()) is None and bind_problem("0.0.0.0", ("k",)) is None
    problem = bind_problem("0.0.0.0", ())
    assert problem is not None and "--api-key" in problem and "--api-key-file" in problem


def test_share_rules_refuse_the_python_verifier_and_cap_runs(tmp_path: Path) -> None:
    service = StudioService(workflows_dir=tmp_path / "wf", examples_dir=ROOT / "workflows", dry_run=True,
                            trace_db=tmp_path / "t.db", models_dir=tmp_path / "models")
    config = studio_config(service)
    remote = check_access(_request("10.1.1.1", {"Authorization": "Bearer k"}),
                          ServeConfig(remote_policy=config.remote_policy, gate=config.gate, api_keys=("k",)),
                          service.policy)
    req = parse_chat({"model": "instruction_best_of_n", "messages": [],
                      "inputs": {"prompt": "Say hi", "check": "all_lowercase"}})
    model = find_model(service, remote.policy, "instruction_best_of_n")
    assert isinstance(model, WorkflowModel)
    with pytest.raises(ApiError) as info:
        prepare(service, remote, model, req)
    assert (info.value.status, info.value.code) == (403, "refused_by_share_mode")
    assert info.value.extra["issues"][0]["code"] == "python_disabled"
    local = check_access(_request(), config, service.policy)
    prepared = prepare(service, local, model, req)
    assert prepared.budget.max_tokens is None
    cot = prepare(service, remote, find_model(service, remote.policy, "chain_of_thought"), _chat(n=2, seed=5))
    assert cot.budget == remote.policy.budget_caps and cot.seeds[0] == 5 and len(set(cot.seeds)) == 2
    ids = [m["id"] for m in list_models(service, remote.policy)]
    assert "chain_of_thought" in ids and any(i.endswith(".gguf") for i in ids)
    service.close()
