"""metagen.evaluate and Evaluation on the scripted fake backend: data as a path, rows or a DataFrame, sweeps,
tables, figures, the report, resume, and bad arguments."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import pytest

import metagen
from app.cli.main import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "datasets" / "arithmetic.jsonl"
ROWS = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 5 + 1?", "answer": "6"},
        {"question": "What is 3 + 3?", "answer": "6"}]


def _pair() -> list[metagen.Workflow]:
    return [metagen.load("chain_of_thought"), metagen.load("self_consistency")]


def test_greedy_against_self_consistency_with_a_sweep(studio: metagen.Studio) -> None:
    result = metagen.evaluate(_pair(), DATA, metric="number", sweep={"think.n": [1, 2, 4]}, limit=3,
                              studio=studio, progress=False)
    assert result.status == "succeeded" and result.eval_id
    assert [(p["workflow"], p["params"]) for p in result.points] == [
        ("chain-of-thought", {}), ("self-consistency", {"think.n": 1}), ("self-consistency", {"think.n": 2}),
        ("self-consistency", {"think.n": 4})]
    assert len(result.items) == 3 * 4
    frame = result.to_pandas()
    assert len(frame) == 12 and {"workflow", "label", "item_idx", "correct", "think.n", "run_id"} <= set(frame)
    points = result.points_frame()
    assert len(points) == 4 and {"accuracy", "completion_tokens", "pareto"} <= set(points)
    for kind in ("accuracy", "tokens", "pareto", "passk"):
        assert isinstance(result.figure(kind), go.Figure)
    with pytest.raises(ValueError, match="kind"):
        result.figure("nope")


def test_without_a_metric_the_dataset_declares_its_own(studio: metagen.Studio, tmp_path: Path) -> None:
    declared = metagen.evaluate(metagen.load("chain_of_thought"), DATA, limit=2, studio=studio, progress=False)
    assert declared.summary["metric"] == "number"  # datasets/arithmetic.meta.yaml says so, as for `metagen eval`
    rows = tmp_path / "plain.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS), encoding="utf-8")
    plain = metagen.evaluate(metagen.load("chain_of_thought"), str(rows), studio=studio, progress=False)
    assert plain.summary["metric"] == "exact"  # nothing declared: exact match


def test_points_are_the_cli_json_points(studio: metagen.Studio, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    result = metagen.evaluate(metagen.load("chain_of_thought"), ROWS, metric="number", studio=studio,
                              progress=False)
    studio.service.trace_store.flush()
    assert cli_main(["eval", "show", result.eval_id, "--json", "--db", str(tmp_path / "traces.db")]) == 0
    assert json.loads(capsys.readouterr().out)["points"] == result.points


def test_rows_and_a_dataframe_are_the_same_dataset(studio: metagen.Studio) -> None:
    wf = metagen.load("chain_of_thought")
    a = metagen.evaluate(wf, ROWS, metric="number", studio=studio, progress=False)
    b = metagen.evaluate(wf, pd.DataFrame(ROWS), metric="number", studio=studio, progress=False)
    assert a.summary["dataset"]["sha256"] == b.summary["dataset"]["sha256"]
    assert [p["total"] for p in a.points] == [p["total"] for p in b.points] == [3]


def test_pass_at_k_without_a_sampler_says_why(studio: metagen.Studio) -> None:
    result = metagen.evaluate(metagen.load("chain_of_thought"), ROWS, metric="number", studio=studio,
                              progress=False)
    fig = result.figure("passk")
    assert not fig.data and "no sampler" in fig.layout.annotations[0].text


def test_a_dict_names_the_workflows_and_map_binds_columns(studio: metagen.Studio) -> None:
    rows = [{"q": r["question"], "answer": r["answer"]} for r in ROWS]
    result = metagen.evaluate({"greedy": metagen.load("chain_of_thought")}, rows, metric="number",
                              map={"question": "q"}, studio=studio, progress=False)
    assert result.points[0]["workflow"] == "greedy"


def test_report_and_display_are_offline(studio: metagen.Studio, tmp_path: Path) -> None:
    result = metagen.evaluate(_pair(), ROWS, metric="number", sweep={"think.n": [1, 2]}, studio=studio,
                              progress=False)
    path = result.report_html(tmp_path / "report.html")
    text = path.read_text(encoding="utf-8")
    assert result.eval_id in text and "<script src=" not in text
    html = result._repr_html_()
    assert "mg-eval-points" in html and "<script src=" not in html


def test_resume_of_a_finished_evaluation_returns_it(studio: metagen.Studio) -> None:
    first = metagen.evaluate(metagen.load("chain_of_thought"), ROWS, metric="number", studio=studio,
                             progress=False)
    again = metagen.evaluate(None, None, metric="number", resume=first.eval_id, studio=studio, progress=False)
    assert again.eval_id == first.eval_id and again.points == first.points


def test_setup_problems_are_reported_before_anything_runs(studio: metagen.Studio) -> None:
    with pytest.raises(ValueError, match="nope") as caught:
        metagen.evaluate(metagen.load("self_consistency"), ROWS, metric="number", sweep={"nope.n": [1]},
                         studio=studio, progress=False)
    assert "nothing was run" in str(caught.value)
    assert metagen.traces(studio=studio) == []


@pytest.mark.parametrize(("args", "kwargs", "error", "named"), [
    ((3, ROWS), {}, TypeError, "workflows"),
    (([], ROWS), {}, ValueError, "workflows"),
    ((None, 3), {}, TypeError, "data"),
    ((None, []), {}, ValueError, "data"),
    ((None, [1, 2]), {}, ValueError, "data"),
    ((None, ROWS), {"metric": 3}, TypeError, "metric"),
    ((None, ROWS), {"sweep": 3}, TypeError, "sweep"),
    ((None, ROWS), {"limit": 0}, ValueError, "limit"),
    ((None, ROWS), {"limit": "2"}, TypeError, "limit"),
    ((None, ROWS), {"concurrency": -1}, ValueError, "concurrency"),
    ((None, ROWS), {"map": ["question"]}, TypeError, "map"),
    ((None, ROWS), {"progress": None}, TypeError, "progress"),
    ((None, "no_such_dataset.jsonl"), {}, ValueError, "no_such_dataset"),
])
def test_bad_arguments_name_the_argument(studio: metagen.Studio, args: tuple[Any, ...], kwargs: dict[str, Any],
                                         error: type[Exception], named: str) -> None:
    workflows = metagen.load("chain_of_thought") if args[0] is None else args[0]
    options = {"metric": "number", "studio": studio, "progress": False, **kwargs}
    with pytest.raises(error, match=named):
        metagen.evaluate(workflows, args[1], **options)


def test_pandas_and_tqdm_are_optional(studio: metagen.Studio, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # as if it were not installed
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    result = metagen.evaluate(metagen.load("chain_of_thought"), ROWS, metric="number", studio=studio)
    assert result.points[0]["total"] == 3 and len(result.items) == 3
    with pytest.raises(ImportError, match=r"metagen-studio\[notebook\]"):
        result.to_pandas()


def test_importing_metagen_loads_no_optional_or_heavy_package() -> None:
    code = ("import sys, metagen; print(sorted(m for m in ('pandas', 'tqdm', 'gradio', 'llama_cpp', 'IPython') "
            "if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "[]"
