"""A bundle of a real-model run of workflows/self_consistency.yaml (made small: n=4, 24 tokens) replays its
outputs byte for byte with the engine absent (loading a model raises), an edited voter replays with no model call,
and an edited sampler prompt sends only that node's calls to the model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from app.cli.main import main
from app.run import events as ev
from app.run.events import EventRecorder
from app.run.providers import LlamaProvider
from app.run.replay import replay_bundle
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.traces.bundle import read_bundle, write_bundle
from app.workflow.spec import load_workflow_text
from nodes.registry import default_registry

pytestmark = pytest.mark.model

ROOT = Path(__file__).resolve().parents[2]


def _small(edit: Any = None) -> str:
    """self_consistency.yaml with few, short samples (and `edit` applied to its parsed YAML)."""
    data = yaml.safe_load((ROOT / "workflows" / "self_consistency.yaml").read_text(encoding="utf-8"))
    data["nodes"][0]["params"].update(n=4, max_tokens=24, batch_size=2, min_samples=2)
    if edit is not None:
        edit(data)
    return yaml.safe_dump(data, sort_keys=False)


@pytest.fixture(scope="module")
def bundle_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bundle")
    provide = LlamaProvider()
    try:
        with TraceStore(folder / "traces.db") as store:
            result = Scheduler(default_registry(), provide).run(load_workflow_text(_small()), observers=[store],
                                                                seed=11)
            assert result.status == "succeeded", result.error
            target = folder / "sc.bundle.json.gz"
            write_bundle(target, store.export_bundle(result.run_id))
    finally:
        provide.close()
    return target


@pytest.fixture
def no_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any model load fails: what answers must be the bundle."""

    def refuse(*_args: Any, **_kw: Any) -> Any:
        raise AssertionError("a model was loaded during a replay that needs none")

    monkeypatch.setattr(LlamaProvider, "__call__", refuse)
    monkeypatch.setattr(LlamaProvider, "pool", refuse)


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, Any], str]:
    code = main(["replay", *args, "--json", "-q", "--no-trace"])
    out = capsys.readouterr()
    return code, json.loads(out.out) if out.out.strip() else {}, out.err


def test_the_bundle_replays_byte_identical_outputs_with_no_engine(
        bundle_file: Path, no_engine: None, capsys: pytest.CaptureFixture[str]) -> None:
    recorded = read_bundle(bundle_file)
    code, replayed, err = _cli(capsys, str(bundle_file))
    assert code == 0, err
    assert json.dumps(replayed["outputs"], sort_keys=True) == json.dumps(recorded["run"]["outputs"], sort_keys=True)
    assert replayed["calls"] == {"replayed": recorded["run"]["stats"]["lm_calls"], "model": 0}
    assert replayed["calls"]["replayed"] >= 2


def test_an_edited_voter_replays_with_no_model_call(bundle_file: Path, no_engine: None, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    edited = tmp_path / "voter.yaml"
    edited.write_text(_small(lambda d: d["nodes"][1]["params"].update(method="mbr", mbr_on="answer")),
                      encoding="utf-8")
    code, replayed, err = _cli(capsys, str(bundle_file), "--workflow", str(edited))
    assert code == 0, err
    assert replayed["calls"]["model"] == 0 and replayed["calls"]["replayed"] > 0
    assert replayed["outputs"]["votes"]["method"] == "mbr"


def test_an_edited_sampler_prompt_calls_the_model_for_that_node_only(bundle_file: Path) -> None:
    edited = _small(lambda d: d["nodes"][0]["params"].update(
        prompt="{question}\nReason briefly, then write 'Answer: <number>'."))
    recorder = EventRecorder()
    provide = LlamaProvider()
    try:
        outcome = replay_bundle(read_bundle(bundle_file), workflow=load_workflow_text(edited),
                                model_provider=provide, observers=[recorder])
    finally:
        provide.close()
    assert outcome.result.status == "succeeded", outcome.result.error
    calls = recorder.of_type(ev.LM_CALL)
    assert outcome.calls.to_json() == {"replayed": 0, "model": len(calls)} and calls
    assert {e.node_id for e in calls} == {"think"}
    assert all("Reason briefly" in e.data["prompt"] for e in calls)


def test_a_replayed_run_is_traced_as_a_replay_of_the_bundled_run(bundle_file: Path, no_engine: None,
                                                                   tmp_path: Path) -> None:
    from app.viz.summary import summary_body

    bundle = read_bundle(bundle_file)
    with TraceStore(tmp_path / "replays.db") as store:
        outcome = replay_bundle(bundle, observers=[store])
        assert store.flush()
        record = store.get_run(outcome.result.run_id)
    assert record["provenance"]["source"] == "replay"
    assert record["provenance"]["imported_from"] == bundle["run"]["id"]
    assert "replay of" in summary_body(record) and bundle["run"]["id"] in summary_body(record)
