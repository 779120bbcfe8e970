"""Run bundles on the fake backend: `metagen traces export RUN --bundle` and `metagen replay` as a user types them,
an edited workflow replayed with only its changed calls sent to the model, sub-workflows carried in the bundle, and
files that are not bundles refused with a clear error and no traceback."""

from __future__ import annotations

import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from app.cli.exit_codes import EXIT_FAILED, EXIT_INVALID
from app.cli.main import main
from app.run.replay import replay_bundle
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.traces.bundle import BundleError, parse_bundle
from app.workflow.spec import load_workflow, load_workflow_text
from app.workflow.subworkflows import ChildLoader
from backends.fake import FakeBackend
from nodes.base import to_jsonable

ROOT = Path(__file__).resolve().parents[2]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


class CountingFake(FakeBackend):
    """The 'model' of an edited replay: counts the samples drawn, by prompt."""

    def __init__(self) -> None:
        super().__init__(reply_fn=lambda prompt, seed: ["Answer: 42", "Answer: 41", "Answer: 42"][seed % 3])
        self.drawn: list[str] = []

    def generate(self, prompt: Any, params: Any, n: int = 1, **kw: Any) -> Any:
        self.drawn.extend([str(prompt)] * n)
        return super().generate(prompt, params, n=n, **kw)


@pytest.fixture
def bundle(sc_yaml: str, make_scheduler: Callable[..., Scheduler], store: TraceStore) -> dict[str, Any]:
    result = make_scheduler().run(load_workflow_text(sc_yaml), observers=[store], seed=3)
    assert result.status == "succeeded"
    out = store.export_bundle(result.run_id)
    assert to_jsonable(result.outputs) == out["run"]["outputs"]
    return json.loads(json.dumps(out))


def test_replay_without_a_model_reproduces_the_outputs(bundle: dict[str, Any]) -> None:
    outcome = replay_bundle(bundle)  # no model_provider: any call not in the bundle fails
    assert outcome.result.status == "succeeded"
    assert to_jsonable(outcome.result.outputs) == bundle["run"]["outputs"]
    assert outcome.calls.to_json() == {"replayed": 6, "model": 0}
    for key in ("lm_calls", "prompt_tokens", "completion_tokens"):
        assert outcome.result.stats.to_json()[key] == bundle["run"]["stats"][key]


def test_an_edited_voter_needs_no_model_and_an_edited_prompt_only_its_node(
        bundle: dict[str, Any], sc_yaml: str) -> None:
    model = CountingFake()
    voter = load_workflow_text(sc_yaml.replace("method: majority, extract: regex", "method: mbr, extract: regex"))
    outcome = replay_bundle(bundle, workflow=voter, model_provider=lambda spec: model)
    assert outcome.result.status == "succeeded" and outcome.calls.to_json() == {"replayed": 6, "model": 0}
    assert model.drawn == []

    two = sc_yaml.replace("- id: vote", """- id: check
    kind: sampler
    params: {n: 2, temperature: 0.7, max_tokens: 20, prompt: "Check: {question}"}
    inputs: {question: inputs.question}
  - id: vote""")
    prompt = load_workflow_text(two.replace("Think step by step", "Think slowly"))
    outcome = replay_bundle(bundle, workflow=prompt, model_provider=lambda spec: model)
    assert outcome.result.status == "succeeded"
    assert outcome.calls.to_json() == {"replayed": 0, "model": 8}
    assert len(model.drawn) == 8 and all("Think slowly" in p or "Check:" in p for p in model.drawn)


def test_a_miss_with_no_model_names_the_node_and_the_change(bundle: dict[str, Any], sc_yaml: str) -> None:
    outcome = replay_bundle(bundle, workflow=load_workflow_text(sc_yaml.replace("temperature: 0.7",
                                                                                 "temperature: 0.8")))
    assert outcome.result.status == "failed"
    failure = outcome.result.failure
    assert failure is not None and failure.node_id == "think" and failure.cause == "ReplayMissError"
    assert "node 'think'" in failure.message and "temperature 0.7 → 0.8" in failure.message


def test_subworkflows_travel_in_the_bundle(tmp_path: Path, make_scheduler: Callable[..., Scheduler],
                                           store: TraceStore) -> None:
    (tmp_path / "child.yaml").write_text("""version: 1
name: child
inputs: {question: {type: text}}
nodes:
  - id: gen
    kind: generator
    params: {prompt: "Child answers {question}", max_tokens: 10}
    inputs: {question: inputs.question}
outputs: {answer: gen.text}
""", encoding="utf-8")
    (tmp_path / "parent.yaml").write_text("""version: 1
name: parent
inputs: {question: {type: text, default: "2 + 2?"}}
nodes:
  - id: sub
    kind: workflow
    params: {workflow: child}
    inputs: {question: inputs.question}
outputs: {answer: sub.answer}
""", encoding="utf-8")
    scheduler = make_scheduler()
    scheduler.children = ChildLoader(folders=(tmp_path,))
    result = scheduler.run(load_workflow(tmp_path / "parent.yaml"), observers=[store])
    assert result.status == "succeeded", result.error
    bundle = store.export_bundle(result.run_id)
    assert "child" in bundle["workflow"]["subworkflows"]
    assert {c["node"] for c in bundle["calls"]} == {"sub/gen"}
    (tmp_path / "child.yaml").unlink()  # the bundle carries it
    outcome = replay_bundle(json.loads(json.dumps(bundle)))
    assert outcome.result.outputs == result.outputs and outcome.calls.to_json() == {"replayed": 1, "model": 0}


def test_the_cli_exports_and_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "t.db"
    workflow = str(ROOT / "workflows" / "self_consistency.yaml")
    code, out, err = run_cli(capsys, "run", workflow, "--dry-run", "--json", "-q", "--db", str(db))
    assert code == 0, err
    ran = json.loads(out)
    target = tmp_path / "run.bundle.json.gz"
    code, _, err = run_cli(capsys, "traces", "export", ran["run_id"][:6], "--bundle", str(target), "--db", str(db))
    assert code == 0 and str(target) in err
    assert gzip.decompress(target.read_bytes()).startswith(b'{"format":"metagen-bundle"')

    code, out, err = run_cli(capsys, "replay", str(target), "--json", "-q", "--db", str(db))
    assert code == 0, err
    replayed = json.loads(out)
    assert set(replayed) == set(ran) | {"calls"}
    assert replayed["outputs"] == ran["outputs"] and replayed["status"] == "succeeded"
    assert replayed["calls"] == {"replayed": ran["stats"]["lm_calls"], "model": 0}
    assert "outputs identical to the recorded run's" in err

    edited = tmp_path / "edited.yaml"
    edited.write_text(Path(workflow).read_text(encoding="utf-8").replace("Think step by step", "Think twice"),
                      encoding="utf-8")
    code, out, err = run_cli(capsys, "replay", str(target), "--workflow", str(edited), "--no-model", "-q",
                             "--no-trace")
    assert code == EXIT_FAILED and "Traceback" not in err
    assert "error: node 'think' asks a changed prompt" in err and "Think twice" in err
    code, out, err = run_cli(capsys, "replay", str(target), "--workflow", str(edited), "--dry-run", "--json", "-q",
                             "--no-trace")
    assert code == 0 and json.loads(out)["calls"]["replayed"] == 0 and json.loads(out)["calls"]["model"] > 0
    assert "0 model calls answered from the bundle" in err


@pytest.mark.parametrize(("content", "expected"), [
    (b'{"format": "metagen-trace", "format_version": 1}', "a trace export, not a bundle"),
    (b"[1, 2, 3]", "is not a Metagen run bundle"),
    (b"\x00\x01binary\xff", "neither JSON nor gzip-compressed JSON"),
    (b'{"format": "metagen-bundle", "format_version": 99, "run": {}}', "upgrade Metagen Studio"),
    (b'{"format": "metagen-bundle", "format_version": 1, "run": {}, "workflow": {"yaml": "x"}, "models": {}}',
     "'calls' is missing"),
])
def test_files_that_are_not_bundles_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                content: bytes, expected: str) -> None:
    path = tmp_path / "b.json"
    path.write_bytes(content)
    code, _, err = run_cli(capsys, "replay", str(path), "--no-trace")
    assert code == EXIT_INVALID and expected in err and "Traceback" not in err


def test_truncated_bundles_are_refused(bundle: dict[str, Any], tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    data = json.dumps(bundle).encode()
    with pytest.raises(BundleError, match="truncated"):
        parse_bundle(data[: len(data) // 2])
    with pytest.raises(BundleError, match="damaged or truncated gzip"):
        parse_bundle(gzip.compress(data)[:200])
    code, _, err = run_cli(capsys, "replay", str(tmp_path / "missing.json"), "--no-trace", "--json")
    assert code == EXIT_INVALID and "cannot read" in err


def test_a_run_recorded_without_requests_cannot_be_bundled(sc_yaml: str, make_scheduler: Callable[..., Scheduler],
                                                           store: TraceStore) -> None:
    scheduler = make_scheduler()
    scheduler.record_calls = False
    result = scheduler.run(load_workflow_text(sc_yaml), observers=[store])
    with pytest.raises(BundleError, match="without its model calls' requests"):
        store.export_bundle(result.run_id)


def test_runs_served_from_the_caches_replay_too(sc_yaml: str, make_scheduler: Callable[..., Scheduler],
                                               store: TraceStore) -> None:
    """A scheduler keeps samples and node outputs between runs: a run that took them from there (a sweep point, the
    studio) still replays alone, its cached samples and nodes being in its bundle."""
    scheduler = make_scheduler()
    scheduler.run(load_workflow_text(sc_yaml), observers=[store], seed=5)
    again = scheduler.run(load_workflow_text(sc_yaml), observers=[store], seed=5)  # every node from the node cache
    more = scheduler.run(load_workflow_text(sc_yaml.replace("n: 6", "n: 8")), observers=[store], seed=5)
    assert again.stats.nodes_cached == 2 and again.stats.lm_calls == 0
    assert more.stats.completion_tokens_reused > 0 and more.stats.lm_calls == 2  # 6 samples from the sample cache
    for run in (again, more):
        outcome = replay_bundle(json.loads(json.dumps(store.export_bundle(run.run_id))))
        assert outcome.result.status == "succeeded" and outcome.result.outputs == run.outputs
        assert outcome.calls.model == 0
    assert outcome.calls.replayed == 8


def test_an_exported_and_imported_run_can_still_be_bundled(bundle: dict[str, Any], store: TraceStore,
                                                           tmp_path: Path) -> None:
    exported = json.loads(json.dumps(store.export_run(bundle["run"]["id"])))
    assert len(exported["requests"]) >= len(bundle["calls"])
    with TraceStore(tmp_path / "other.db") as other:
        imported = other.import_run(exported)
        again = other.export_bundle(imported)
    assert again["calls"] == bundle["calls"] and again["workflow"] == bundle["workflow"]
    del exported["requests"]  # an export made before bundles: the run imports, its bundle is refused
    with TraceStore(tmp_path / "old.db") as old:
        with pytest.raises(BundleError, match="without its model calls' requests"):
            old.export_bundle(old.import_run(exported))
