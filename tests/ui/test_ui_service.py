"""The UI's service layer without a browser: workflow files, YAML <-> editor JSON, queued runs, live state."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService, output_views
from app.share.policy import SharePolicy
from app.workflow.spec import load_workflow_text
from backends.fake import FakeBackend

EXAMPLES = Path(__file__).resolve().parents[2] / "workflows"

CHAIN = """version: 1
name: chain
inputs:
  question: {type: text, default: 'What is 2 + 2?'}
nodes:
- id: first
  kind: generator
  params: {prompt: '{question}', max_tokens: 16}
  inputs: {question: inputs.question}
- id: second
  kind: generator
  params: {prompt: 'Check: {draft}', max_tokens: 16}
  inputs: {draft: first.text}
- id: third
  kind: generator
  params: {prompt: 'Final: {draft}', max_tokens: 16}
  inputs: {draft: second.text}
outputs: {answer: third.text}
"""

VOTE = """version: 1
name: vote
inputs:
  question: {type: text, default: 'What is 3 + 4?'}
nodes:
- id: think
  kind: sampler
  params: {prompt: '{question}', n: 4, max_tokens: 16, extract: last_number}
  inputs: {question: inputs.question}
- id: vote
  kind: voter
  params: {method: majority, extract: last_number}
  inputs: {candidates: think.candidates}
outputs: {answer: vote.answer}
"""


def make_service(tmp_path: Path, backend: FakeBackend | None = None, **kwargs: Any) -> StudioService:
    fake = backend or FakeBackend(replies=["Answer: 7", "Answer: 7", "Answer: 8", "Answer: 7"])
    return StudioService(provider=lambda spec: fake, workflows_dir=tmp_path / "workflows", examples_dir=EXAMPLES,
                         models_dir=tmp_path / "models", trace_db=tmp_path / "traces.db", **kwargs)


def editor_json(text: str) -> dict[str, Any]:
    return load_workflow_text(text).to_dict()


def test_first_start_copies_the_examples_and_lists_them(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    examples = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
    assert examples, "the repository ships example workflows"
    assert service.list_examples() == examples
    assert service.list_workflows() == examples
    opened = service.open_workflow(examples[0])
    assert opened["yaml"] == (EXAMPLES / f"{examples[0]}.yaml").read_text(encoding="utf-8")
    assert opened["error"] is None and opened["workflow"]["nodes"]


def test_a_second_start_keeps_what_the_user_deleted_deleted(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    first = service.list_workflows()[0]
    service.path_for(first).unlink()
    assert first not in make_service(tmp_path).list_workflows()


def test_save_is_canonical_and_refuses_paths_and_overwrites_when_asked(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    saved = service.save_workflow("mine", editor_json(CHAIN))
    path = tmp_path / "workflows" / "mine.yaml"
    assert path.read_text(encoding="utf-8") == saved["yaml"] == load_workflow_text(CHAIN).to_yaml()
    assert service.open_workflow("mine")["yaml"] == saved["yaml"]
    with pytest.raises(UserError, match="already exists"):
        service.save_workflow("mine", editor_json(VOTE), overwrite=False)
    for bad in ("../escape", "/etc/passwd", "a/b", ""):
        with pytest.raises(UserError):
            service.save_workflow(bad, editor_json(CHAIN))
    assert not (tmp_path / "escape.yaml").exists()
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_yaml_errors_come_back_with_their_line(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    broken = CHAIN.replace("max_tokens: 16}\n  inputs: {question", "max_tokens: 16\n  inputs: {question")
    result = service.parse_yaml(broken)
    assert result["error"]["code"] == "yaml_syntax"
    assert result["error"]["line"] in (7, 8, 9)
    ok = service.parse_yaml(CHAIN)
    assert ok["error"] is None
    assert [n["id"] for n in ok["workflow"]["nodes"]] == ["first", "second", "third"]
    assert ok["issues"] == []
    assert ok["inputs"] == {"question": {"type": "text", "default": "What is 2 + 2?", "description": ""}}


def test_editor_json_gives_canonical_yaml_and_problems_with_codes(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    data = editor_json(VOTE)
    data["nodes"][1]["inputs"] = {}
    described = service.from_editor(data)
    assert described["yaml"] == load_workflow_text(described["yaml"]).to_yaml()
    assert "missing_input" in {i["code"] for i in described["issues"]}
    with pytest.raises(UserError):
        service.from_editor("not a workflow")


def test_a_run_streams_node_states_and_ends_with_outputs_and_candidate_tables(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    first = service.start_run(editor_json(VOTE), {"question": "What is 3 + 4?"}, seed=3)
    assert first["status"] in ("queued", "running", "succeeded")
    final = service.wait_run(first["run_id"], timeout=30)
    assert final["status"] == "succeeded", final["error"]
    assert final["outputs"]["answer"] == "7"
    assert final["progress"] == 1.0
    assert {n: s["state"] for n, s in final["nodes"].items()} == {"think": "done", "vote": "done"}
    views = service.node_outputs(first["run_id"], "vote")["views"]
    table = next(v for v in views if v["type"] == "candidates")
    assert [r["answer"] for r in table["rows"]] == ["7", "7", "8", "7"]
    assert sum(r["winner"] for r in table["rows"]) == 1
    assert table["rows"][table["winner"]]["answer"] == "7"
    assert final["output_views"][0] == {"port": "answer", "type": "value", "text": "7"}
    # the trace store recorded it
    runs = service.trace_store.list_runs()
    assert [r["id"] for r in runs] == [first["run_id"]]
    again = service.wait_run(service.start_run(editor_json(VOTE), {}, seed=3)["run_id"], timeout=30)
    assert {s["state"] for s in again["nodes"].values()} == {"cached"}
    service.close()


def test_cancel_stops_a_run_and_the_next_one_still_works(tmp_path: Path) -> None:
    started = threading.Event()
    release = threading.Event()

    def slow(prompt: str, seed: int) -> str:
        started.set()
        release.wait(10)
        return "done"

    service = make_service(tmp_path, FakeBackend(reply_fn=slow))
    run = service.start_run(editor_json(CHAIN), {}, seed=0)
    assert started.wait(10)
    service.cancel_run(run["run_id"])
    release.set()
    final = service.wait_run(run["run_id"], timeout=30)
    assert final["status"] == "cancelled"
    states = {n: s["state"] for n, s in final["nodes"].items()}
    assert states["third"] in ("skipped", "queued") and states["third"] != "done"
    nxt = service.wait_run(service.start_run(editor_json(CHAIN), {}, seed=1)["run_id"], timeout=30)
    assert nxt["status"] == "succeeded"
    service.close()


def test_runs_queue_behind_the_policy_limit(tmp_path: Path) -> None:
    gate = threading.Event()

    def blocked(prompt: str, seed: int) -> str:
        gate.wait(10)
        return "Answer: 1"

    policy = SharePolicy(max_concurrent_runs=1, max_queue=1)
    service = make_service(tmp_path, FakeBackend(reply_fn=blocked), policy=policy)
    first = service.start_run(editor_json(CHAIN), {}, seed=0)
    second = service.start_run(editor_json(CHAIN), {}, seed=1)
    for _ in range(100):
        if service.run_status(second["run_id"])["status"] == "queued" and \
                service.run_status(first["run_id"])["status"] == "running":
            break
        threading.Event().wait(0.05)
    assert service.run_status(second["run_id"])["queue_position"] == 1
    with pytest.raises(UserError, match="waiting"):
        service.start_run(editor_json(CHAIN), {}, seed=2)
    gate.set()
    assert service.wait_run(first["run_id"], timeout=30)["status"] == "succeeded"
    assert service.wait_run(second["run_id"], timeout=30)["status"] == "succeeded"
    service.close()


def test_bad_runs_are_refused_with_a_message_not_a_traceback(tmp_path: Path) -> None:
    service = make_service(tmp_path)
    data = editor_json(VOTE)
    data["nodes"][0]["params"]["n"] = 0
    with pytest.raises(UserError, match="bad_param"):
        service.start_run(data, {})
    with pytest.raises(UserError, match="seed"):
        service.start_run(editor_json(VOTE), {}, seed="abc")  # type: ignore[arg-type]
    with pytest.raises(UserError, match="no live run"):
        service.run_status("nope")


def test_output_views_turn_candidate_sets_into_rows() -> None:
    views = output_views({
        "candidates": {"__type__": "candidates", "winner": 1, "prompt": "", "meta": {},
                       "candidates": [{"text": "a", "answer": "1", "score": 0.25, "cluster": 0},
                                      {"text": "b", "answer": "2", "score": None, "cluster": 1}]},
        "result": {"method": "majority"},
    })
    assert views[0]["rows"] == [
        {"index": 0, "text": "a", "answer": "1", "score": 0.25, "cluster": 0, "winner": False},
        {"index": 1, "text": "b", "answer": "2", "score": None, "cluster": 1, "winner": True},
    ]
    assert views[1] == {"port": "result", "type": "value", "text": '{\n  "method": "majority"\n}'}
