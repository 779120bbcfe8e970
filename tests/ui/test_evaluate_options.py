"""The Evaluate tab's run options without a browser: repeats, shared samples, bootstrap and a baseline reach the
evaluation, bad values are messages, and the paired comparisons show in the summary (fake model)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from app.service.studio import StudioService
from tests.ui.test_evaluate_tab import ROWS, SAVED, VOTE, apply, build_tab, initial_form, service, write_jsonl

__all__ = ["service"]  # the fixture, used by name


def test_repeats_share_samples_bootstrap_and_baseline_from_the_tab(service: StudioService, tmp_path: Path) -> None:
    tab = build_tab(service)
    v, h = tab.view, tab.handlers
    form: dict[Any, Any] = initial_form(tab)
    assert form[v.repeats] == 1 and form[v.bootstrap] == 0 and form[v.share_samples] is False
    form[v.editor_yaml] = VOTE
    apply(form, h.on_select(form))
    form[v.upload] = str(write_jsonl(tmp_path / "tiny.jsonl", ROWS))
    apply(form, h.on_upload(form))
    form.update({v.workflows: [form[v.workflows][0], SAVED + "chain_of_thought"],
                 v.metric: "number", v.sweeps: "", v.repeats: 2, v.share_samples: True, v.bootstrap: 5})
    apply(form, h.on_workflows(form))
    form[v.sweeps] = ""
    bad = h.on_estimate({**form, v.repeats: 0})[v.message]
    assert "repeats" in bad and "from 1 to" in bad and "Traceback" not in bad
    assert "no single point 'nope'" in h.on_estimate({**form, v.baseline: "nope"})[v.message]
    form[v.baseline] = "chain_of_thought"
    assert "12 (3 items" in h.on_estimate(form)[v.estimate]  # 3 items × 2 workflows × 2 repeats
    started = h.on_start(form)
    assert "Started evaluation" in started[v.message], started[v.message]
    form[v.past] = eval_id = started[v.past]["value"]
    out, deadline = started, time.monotonic() + 60
    while out.get(v.timer) is None or out[v.timer].active:
        assert time.monotonic() < deadline, "the evaluation did not finish"
        time.sleep(0.2)
        out = h.on_poll(form)
    assert "12 of 12 runs" in out[v.progress]
    assert "mg-eval-comparisons" in out[v.summary] and "against the baseline chain_of_thought" in out[v.summary]
    config = service.evaluations.result(eval_id)["summary"]
    assert config["repeats"] == 2 and config["share_samples"] is True and config["baseline"] == "chain_of_thought"
    assert [c["b"] for c in config["comparisons"]] == ["chain_of_thought"]


def test_the_sweep_list_offers_the_params_of_sub_workflows(service: StudioService) -> None:
    from app.ui.evaluate_form import add_axis, sweep_options
    from app.workflow.spec import load_workflow
    from tests.ui.test_evaluate_tab import EXAMPLES

    wf = load_workflow(EXAMPLES / "best_of_refined.yaml")
    keys = [key for _, key in sweep_options(service, [wf])[0]]
    assert "drafts.n" in keys and "refine_each/critique.temperature" in keys
    text, message = add_axis(service, [wf], "refine_each/critique.temperature", "")
    assert message == "" and text.startswith("refine_each/critique.temperature=")
