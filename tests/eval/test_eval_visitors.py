"""Share mode keeps visitors' evaluations and uploaded datasets apart (EvaluationService, a real trace store on
a temporary SQLite file, the fake model); the owner, in local mode, sees every evaluation."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from app.eval.datasets import dataset_dirs
from app.service import visitor_uploads
from app.service.errors import UserError
from app.service.studio import StudioService
from app.share.policy import SharePolicy
from backends.fake import FakeBackend

WF = """version: 1
name: echo-eval
inputs:
  question: {type: text}
nodes:
- id: answer
  kind: generator
  params: {prompt: '{question}', max_tokens: 8}
  inputs: {question: inputs.question}
outputs: {answer: answer.text}
"""
ROWS = [{"question": "What is 1 + 1?", "answer": "2"}, {"question": "What is 2 + 2?", "answer": "4"}]


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def make_service(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, share: bool = True,
                 release: threading.Event | None = None) -> StudioService:
    monkeypatch.setenv("METAGEN_DATASETS", str(tmp_path / "datasets"))
    monkeypatch.setenv("METAGEN_HOME", str(tmp_path / "home"))  # the calibration cache
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    policy = (SharePolicy.for_serving("127.0.0.1", force_share_mode=True, models_folder=models) if share
              else SharePolicy.local())

    def reply(_prompt: str, _seed: int) -> str:
        if release is not None:
            release.wait(20)
        return "4"

    backend = FakeBackend(reply_fn=reply)
    return StudioService(policy=policy, provider=lambda spec: backend, dry_run=True,
                         workflows_dir=tmp_path / "workflows", examples_dir=tmp_path / "no-examples",
                         models_dir=models, trace_db=tmp_path / "traces.db")


@pytest.fixture
def shared(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    release = threading.Event()
    service = make_service(tmp_path, monkeypatch, release=release)
    yield service, release
    release.set()
    service.close()


def request(dataset: str) -> dict[str, Any]:
    return {"workflows": [{"name": "echo", "yaml": WF}], "dataset": dataset, "metric": "exact"}


def wait_done(service: StudioService, eval_id: str, visitor: str | None) -> dict[str, Any]:
    deadline = time.monotonic() + 60
    while True:
        status = service.evaluations.status(eval_id, visitor=visitor)
        if not status["running"]:
            return status
        assert time.monotonic() < deadline, "the evaluation did not finish"
        time.sleep(0.05)


def refused(call: Any, eval_id: str) -> str:
    """The message of a refused call, with the id itself blanked (to compare refusals of different ids)."""
    with pytest.raises(UserError) as caught:
        call()
    return str(caught.value).replace(eval_id, "ID")


def test_a_visitor_cannot_list_read_or_cancel_another_visitors_evaluation(shared: Any) -> None:
    service, release = shared
    evals = service.evaluations
    evals.upload_dataset("tiny.jsonl", jsonl(ROWS), visitor="alice")
    started = evals.start(request("tiny.jsonl"), visitor="alice")
    eval_id = started["eval_id"]
    assert started["running"] is True  # held in the fake model until released

    assert [e["id"] for e in evals.list(visitor="alice")] == [eval_id]
    assert evals.list(visitor="bob") == [] and evals.list() == []  # None is the app itself, not the owner
    unknown = "0123456789ab"
    for call in (evals.status, evals.cancel):
        other = refused(lambda call=call: call(eval_id, visitor="bob"), eval_id)
        missing = refused(lambda call=call: call(unknown, visitor="bob"), unknown)
        assert other == missing and other.startswith("no evaluation 'ID'")  # the id is not confirmed
        assert refused(lambda call=call: call(eval_id[:4], visitor="bob"), eval_id[:4]).startswith("no evaluation")
    with pytest.raises(UserError, match="another evaluation is running"):
        evals.start(request("arithmetic.jsonl"), visitor="bob")  # told to wait, not shown whose it is

    assert evals.status(eval_id, visitor="alice")["running"] is True  # still running: bob's cancel did nothing
    assert evals.cancel(eval_id, visitor="alice")["eval_id"] == eval_id
    release.set()
    done = wait_done(service, eval_id, "alice")
    assert done["status"] == "cancelled"
    assert evals.list(visitor="bob") == []


def test_a_visitors_evaluation_runs_are_its_own_in_the_traces(shared: Any) -> None:
    service, release = shared
    release.set()
    evals = service.evaluations
    evals.upload_dataset("tiny.jsonl", jsonl(ROWS), visitor="alice")
    eval_id = evals.start(request("tiny.jsonl"), visitor="alice")["eval_id"]
    done = wait_done(service, eval_id, "alice")
    assert done["status"] == "succeeded" and done["done"] == 2
    runs = {item["run_id"] for item in service.evaluations.store.get(eval_id)["items"]}
    mine = evals.visitor_run_ids("alice")
    assert len(runs) == 2 and mine == runs
    assert all(service.trace_store.get_run(run_id) for run_id in mine)  # traced beside the editor's runs
    assert evals.visitor_run_ids("bob") == set()
    run_id = next(iter(mine))
    assert evals.owns_run(run_id, "alice") and not evals.owns_run(run_id, "bob")
    # the Traces tab and ?run= links ask the studio, which adds the visitor's evaluation runs to its own
    assert service.visitor_run_ids("alice") == runs and service.visitor_run_ids("bob") == set()
    assert service.owns_run(run_id, "alice") and not service.owns_run(run_id, "bob")


def test_the_owner_sees_every_evaluation_in_local_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    service = make_service(tmp_path, monkeypatch, share=False)
    try:
        evals = service.evaluations
        evals.upload_dataset("tiny.jsonl", jsonl(ROWS), visitor="alice")
        assert (tmp_path / "datasets" / "uploads" / "tiny.jsonl").is_file()  # the uploads folder, as before
        eval_id = evals.start(request("tiny.jsonl"), visitor="alice")["eval_id"]
        wait_done(service, eval_id, None)
        for visitor in (None, "bob"):
            assert [e["id"] for e in evals.list(visitor=visitor)] == [eval_id]
            assert evals.status(eval_id[:6], visitor=visitor)["eval_id"] == eval_id  # a prefix, as before
            assert "tiny.jsonl" in {d["name"] for d in evals.list_datasets(visitor=visitor)}
        assert evals.visitor_run_ids("bob") is None and evals.owns_run("anything", "bob")
        with pytest.raises(UserError, match="no evaluation 'nope'"):
            evals.status("nope")
    finally:
        service.close()


def test_uploads_are_kept_apart_and_never_overwrite(shared: Any, tmp_path: Path) -> None:
    service, _ = shared
    evals = service.evaluations
    owners = tmp_path / "datasets"
    (owners / "uploads").mkdir(parents=True)
    (owners / "owner.jsonl").write_bytes(jsonl(ROWS))  # the owner's datasets folder
    (owners / "uploads" / "owner_upload.jsonl").write_bytes(jsonl(ROWS))  # uploaded by the owner, locally
    builtin = next(p for p in dataset_dirs()[1:] if (p / "arithmetic.jsonl").is_file()) / "arithmetic.jsonl"
    builtin_hash = hashlib.sha256(builtin.read_bytes()).hexdigest()

    alice_rows = [{"question": "alice?", "answer": "a"}]
    bob_rows = [{"question": "bob?", "answer": "b"}, {"question": "bob again?", "answer": "b"}]
    evals.upload_dataset("shared_name.jsonl", jsonl(alice_rows), visitor="alice")
    evals.upload_dataset("shared_name.jsonl", jsonl(bob_rows), visitor="bob")  # the same name: its own copy
    evals.upload_dataset("alice_only.jsonl", jsonl(alice_rows), visitor="alice")
    assert evals.preview("shared_name.jsonl", visitor="alice")["rows"] == alice_rows
    assert evals.preview("shared_name.jsonl", visitor="bob")["rows"] == bob_rows
    assert evals.upload_folder("alice") != evals.upload_folder("bob")
    assert evals.upload_folder("alice").parent == owners / "uploads" / visitor_uploads.VISITORS_FOLDER

    alice = {d["name"]: d for d in evals.list_datasets(visitor="alice")}
    bob = {d["name"]: d for d in evals.list_datasets(visitor="bob")}
    assert "alice_only.jsonl" in alice and "alice_only.jsonl" not in bob
    assert {"owner.jsonl", "arithmetic.jsonl"} <= set(bob)  # the datasets folders are everyone's
    assert "owner_upload.jsonl" not in alice and "owner_upload.jsonl" not in bob  # the owner's uploads are not
    for name in ("alice_only.jsonl", "owner_upload.jsonl"):
        with pytest.raises(UserError, match="there is no dataset named"):
            evals.preview(name, visitor="bob")
        with pytest.raises(UserError, match="there is no dataset named"):
            evals.plan(request(name), visitor="bob")
    with pytest.raises(UserError, match="a file name, not a path"):
        evals.preview("../" + evals.upload_folder("alice").name + "/alice_only.jsonl", visitor="bob")

    # an upload named like a built-in dataset is the uploader's own copy; the built-in one is untouched
    evals.upload_dataset("arithmetic.jsonl", jsonl(alice_rows), visitor="alice")
    evals.upload_dataset("owner.jsonl", jsonl(alice_rows), visitor="alice")
    assert evals.preview("arithmetic.jsonl", visitor="alice")["rows"] == alice_rows
    assert evals.list_datasets(visitor="alice")[0]["folder"] == "uploads"
    assert {d["name"]: d["folder"] for d in evals.list_datasets(visitor="alice")}["arithmetic.jsonl"] == "uploads"
    assert evals.preview("arithmetic.jsonl", visitor="bob")["rows"] != alice_rows
    assert hashlib.sha256(builtin.read_bytes()).hexdigest() == builtin_hash
    assert (owners / "owner.jsonl").read_bytes() == jsonl(ROWS)
    assert evals.dataset_path("owner.jsonl", visitor="bob") == owners / "owner.jsonl"


def test_uploads_are_bounded_per_visitor(shared: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    service, _ = shared
    evals = service.evaluations
    small = jsonl(ROWS)
    for i in range(visitor_uploads.MAX_VISITOR_FILES):
        evals.upload_dataset(f"set{i}.jsonl", small, visitor="alice")
    with pytest.raises(UserError, match=r"already have 20 uploaded datasets"):
        evals.upload_dataset("one_more.jsonl", small, visitor="alice")
    assert not (evals.upload_folder("alice") / "one_more.jsonl").exists()
    evals.upload_dataset("set0.jsonl", jsonl(ROWS[:1]), visitor="alice")  # replacing one of its own is fine
    evals.upload_dataset("one_more.jsonl", small, visitor="bob")  # the bound is per visitor

    monkeypatch.setattr(visitor_uploads, "MAX_VISITOR_BYTES", 3 * len(small))
    evals.upload_dataset("b1.jsonl", small, visitor="bob")
    with pytest.raises(UserError, match="of uploads per visitor"):
        evals.upload_dataset("b2.jsonl", small + small, visitor="bob")
    assert sorted(p.name for p in evals.upload_folder("bob").iterdir()) == ["b1.jsonl", "one_more.jsonl"]


def test_a_bad_upload_leaves_nothing_behind(shared: Any) -> None:
    service, _ = shared
    evals = service.evaluations
    with pytest.raises(UserError):
        evals.upload_dataset("broken.jsonl", b"{not json\n", visitor="alice")
    assert "broken.jsonl" not in {d["name"] for d in evals.list_datasets(visitor="alice")}
    with pytest.raises(UserError, match=r"upload a \.jsonl or \.csv"):
        evals.upload_dataset("x.py", b"print(1)", visitor="alice")

