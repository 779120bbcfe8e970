"""/v1 and tuned workflows (issue 41, item 5): `tuned/NAME` listed as models and answering, `model: "auto"` answering
with the most recent tuned workflow or the one the server's config names, and a clear 404 before any tune."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.testclient import TestClient

from app.serve.config import studio_config
from app.serve.routes import api_routes
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from app.workflow.spec import load_workflow_text

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
QUESTION = [{"role": "user", "content": "What is 6 times 7?"}]


@pytest.fixture
def service(tmp_path: Path) -> Iterator[StudioService]:
    folder = tmp_path / "wf"
    folder.mkdir()
    service = StudioService(policy=SharePolicy.local(), dry_run=True, workflows_dir=folder,
                            examples_dir=tmp_path / "none", models_dir=tmp_path / "models", trace_db=tmp_path / "t.db")
    (folder / "plain.yaml").write_text((WORKFLOWS / "chain_of_thought.yaml").read_text())
    yield service
    service.close()


def client(service: StudioService, auto: str | None = None) -> TestClient:
    from dataclasses import replace

    config = replace(studio_config(service), auto=auto)
    return TestClient(Starlette(routes=api_routes(service, config)), client=("127.0.0.1", 5000))


def tune_writes(service: StudioService, name: str, example: str, age_s: float, role: str | None = None) -> Path:
    """A tuned workflow as `metagen tune` leaves it: tuned/NAME.yaml in the workflows folder, recommended `age_s`
    seconds ago (its provenance's date: what `auto` goes by); `role`: as an adaptive policy marks its branch files."""
    folder = service.workflows_dir / "tuned"
    folder.mkdir(exist_ok=True)
    path = folder / f"{name}.yaml"
    wf = load_workflow_text((WORKFLOWS / f"{example}.yaml").read_text())
    when = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=age_s)
    wf.provenance = {"tool": "metagen tune", "date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                     **({"role": role} if role else {})}
    path.write_text(wf.to_yaml())
    return path


def models(c: TestClient) -> dict[str, dict[str, Any]]:
    answer = c.get("/v1/models")
    assert answer.status_code == 200, answer.text
    return {m["id"]: m for m in answer.json()["data"]}


def chat(c: TestClient, model: str) -> Any:
    return c.post("/v1/chat/completions", json={"model": model, "messages": QUESTION, "seed": 1})


def test_before_any_tune_auto_is_a_404_that_says_what_to_do(service: StudioService) -> None:
    c = client(service)
    listed = models(c)
    assert "plain" in listed and "auto" not in listed and not any(m.startswith("tuned/") for m in listed)
    answer = chat(c, "auto")
    assert answer.status_code == 404
    error = answer.json()["error"]
    assert error["code"] == "model_not_found" and "metagen tune" in error["message"]


def test_tuned_workflows_are_models_and_auto_answers_with_the_most_recent(service: StudioService) -> None:
    tune_writes(service, "arithmetic-old", "self_consistency", age_s=3600)
    tune_writes(service, "arithmetic-new", "chain_of_thought", age_s=10)
    c = client(service)
    listed = models(c)
    assert {"tuned/arithmetic-old", "tuned/arithmetic-new", "auto", "plain"} <= set(listed)
    assert listed["tuned/arithmetic-new"]["metagen"]["tuned"] is True
    assert listed["tuned/arithmetic-new"]["metagen"]["inputs"]["question"]["type"] == "text"
    assert listed["auto"]["metagen"] == {"kind": "auto", "target": "tuned/arithmetic-new"}
    assert c.get("/v1/models/auto").json()["metagen"]["target"] == "tuned/arithmetic-new"
    answer = chat(c, "auto")
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "tuned/arithmetic-new"  # the reply says which workflow answered
    assert answer.json()["choices"][0]["message"]["content"]
    older = chat(c, "tuned/arithmetic-old")
    assert older.status_code == 200 and older.json()["model"] == "tuned/arithmetic-old"
    tune_writes(service, "code-newest", "self_consistency", age_s=0)  # a new tune lands: auto follows it
    assert chat(c, "auto").json()["model"] == "tuned/code-newest"


def test_the_servers_config_names_what_auto_answers_with(service: StudioService) -> None:
    tune_writes(service, "arithmetic-new", "chain_of_thought", age_s=0)
    tune_writes(service, "pinned", "self_consistency", age_s=3600)
    assert chat(client(service, auto="tuned/pinned"), "auto").json()["model"] == "tuned/pinned"
    assert chat(client(service, auto="plain"), "auto").json()["model"] == "plain"
    assert models(client(service, auto="plain"))["auto"]["metagen"]["target"] == "plain"
    missing = chat(client(service, auto="tuned/nothing"), "auto")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"


@pytest.mark.parametrize("model_id", ["tuned/../plain", "tuned/", "tuned/sub/x", "tuned/missing"])
def test_a_tuned_id_is_a_name_never_a_path(service: StudioService, model_id: str) -> None:
    tune_writes(service, "x", "chain_of_thought", age_s=0)
    answer = chat(client(service), model_id)
    assert answer.status_code == 404 and answer.json()["error"]["code"] == "model_not_found"


def test_auto_goes_by_the_recommendation_not_the_files_time(service: StudioService) -> None:
    """Review 3.4: `auto` followed mtimes, so touching (or hand-editing) an old tuned file made it the target."""
    old = tune_writes(service, "arithmetic-old", "self_consistency", age_s=3600)
    tune_writes(service, "arithmetic-new", "chain_of_thought", age_s=10)
    later = old.stat().st_mtime + 7200
    os.utime(old, (later, later))
    assert models(client(service))["auto"]["metagen"]["target"] == "tuned/arithmetic-new"
    assert list(models(client(service))).index("tuned/arithmetic-new") < list(models(client(service))).index(
        "tuned/arithmetic-old")


def test_the_branch_files_of_an_adaptive_policy_are_not_models(service: StudioService) -> None:
    """Review 3.4: a policy's branch files were listed as models, and the newest of them became `auto`."""
    tune_writes(service, "math-policy", "chain_of_thought", age_s=5)
    tune_writes(service, "math-policy-bin0", "self_consistency", age_s=0, role="branch of math-policy")
    listed = models(client(service))
    assert "tuned/math-policy" in listed and "tuned/math-policy-bin0" not in listed
    assert listed["auto"]["metagen"]["target"] == "tuned/math-policy"


@pytest.mark.parametrize("door", ["responses", "messages"])
def test_the_servers_auto_holds_on_the_responses_and_messages_doors(service: StudioService, door: str) -> None:
    """Review 3.4: `metagen serve --auto NAME` was ignored by /v1/responses and /v1/messages."""
    tune_writes(service, "arithmetic-new", "self_consistency", age_s=0)
    c = client(service, auto="plain")
    body: dict[str, Any] = ({"model": "auto", "input": "What is 6 times 7?"} if door == "responses" else
                            {"model": "auto", "max_tokens": 50, "messages": QUESTION})
    answer = c.post(f"/v1/{door}", json=body)
    assert answer.status_code == 200, answer.text
    assert answer.json()["model"] == "plain"
