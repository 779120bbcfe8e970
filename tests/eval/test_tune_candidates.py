"""The tune's candidates: every grid point of the default candidates validates, the params a node ties to its
compute axis (deepconf's min_samples < n, diverse beam's diverse_groups dividing n) scaled along with it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.eval.sweep import apply_point
from app.eval.tune import candidates as cands
from app.eval.tune.api import TuneOptions
from app.eval.tune.coupled import fit_points
from app.eval.tune.tuner import _dataset, _examples_dir, _metric
from app.platform import paths
from app.workflow.problems import errors
from app.workflow.spec import load_workflow, load_workflow_text
from app.workflow.validation import validate
from nodes.registry import default_registry

ROOT = Path(__file__).resolve().parents[2]


def _candidates(tmp_path: Path, data: str, metric: str | None, budget: int | None,
                axes: list[str] | None = None) -> list[cands.Candidate]:
    options = TuneOptions(data=str(ROOT / data), metric=metric, budget_tokens=budget)
    dataset, path, task = _dataset(options)
    spec, metric_obj = _metric(options, path, task)
    ctx = cands.CandidateContext(dataset=dataset, metric=metric_obj, metric_spec=spec, registry=default_registry(),
                                 model=None, budget_tokens=budget, models_folder=paths.models_dir(),
                                 axes=list(axes or []))
    return cands.make_candidates(cands.find_sources([], _examples_dir(), tmp_path / "wf"), ctx)


@pytest.mark.parametrize(("data", "metric", "budget"), [
    ("datasets/arithmetic.jsonl", None, None), ("datasets/arithmetic.jsonl", None, 1500),
    ("datasets/code.jsonl", "tests", None), ("datasets/code.jsonl", "tests", 2000)])
def test_no_default_candidate_is_skipped_as_invalid(tmp_path: Path, data: str, metric: str | None,
                                                    budget: int | None) -> None:
    found = _candidates(tmp_path, data, metric, budget)
    invalid = [f"{c.label}: {c.reason}" for c in found if c.status == "skipped" and "invalid" in c.reason]
    assert not invalid
    registry = default_registry()
    for c in found:
        if c.status != "skipped":
            assert not errors(validate(load_workflow_text(c.yaml), registry)), c.label


def test_deepconf_and_diverse_beam_race_over_their_whole_grid(tmp_path: Path) -> None:
    found = {c.label: c for c in _candidates(tmp_path, "datasets/arithmetic.jsonl", None, None)}
    deepconf = {c.params["think.n"]: c.params for c in found.values() if c.workflow == "deepconf"}
    assert sorted(deepconf) == [2, 4, 8, 16]
    assert all(found[label].status != "skipped" for label in found if label.startswith("deepconf"))
    assert [deepconf[n]["think.min_samples"] for n in (2, 4, 8, 16)] == [1, 1, 2, 4]  # 1/4 of n, as shipped
    beams = {c.params["beams.n"]: c.params for c in found.values() if c.workflow == "diverse_beam"}
    assert sorted(beams) == [2, 4, 8, 16]
    assert all(n % p["beams.diverse_groups"] == 0 for n, p in beams.items())
    assert [beams[n]["beams.diverse_groups"] for n in (4, 8, 16)] == [2, 4, 8]  # 2 beams a group, as shipped


def test_explicit_axes_get_their_coupled_params_fitted_too() -> None:
    wf = load_workflow(ROOT / "workflows" / "diverse_beam.yaml")
    points = fit_points(wf, [{"beams.n": v} for v in (5, 6, 9)], default_registry())
    # 3 groups of 2 beams as shipped; n=5 (2.5 groups by the ratio) has only 1 or 5 as divisors: the nearer, 1
    assert points == [{"beams.n": 5, "beams.diverse_groups": 1}, {"beams.n": 6, "beams.diverse_groups": 3},
                      {"beams.n": 9, "beams.diverse_groups": 3}]
    for point in points:
        assert not errors(validate(apply_point(wf, point), default_registry()))


def test_a_param_the_point_sets_itself_is_left_alone() -> None:
    wf = load_workflow(ROOT / "workflows" / "deepconf.yaml")
    points = [{"think.n": 4, "think.min_samples": 5}]
    assert fit_points(wf, points, default_registry()) == points  # the user's own values: validation says why
