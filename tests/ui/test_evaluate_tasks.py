"""The Evaluate tab's task presets and Hub datasets without a browser: presets are offered as datasets, picking
one previews its prompts and references and sets its metric; a typed hf: name loads from the (pre-filled,
offline) cache; visitors of a shared app get neither."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.service.errors import UserError
from app.service.studio import StudioService
from app.ui.evaluate_form import dataset_choices
from tests.eval.hub_cache import hub_cache, prefill  # noqa: F401  (the fixture)
from tests.ui.test_evaluate_tab import VOTE, apply, build_tab, initial_form, service  # noqa: F401

GSM8K_ROWS = [{"question": "Tom has 3 apples and buys 4. How many?", "answer": "3 + 4 = 7\n#### 7"},
              {"question": "Ann has 5 pens and loses 2. How many?", "answer": "5 - 2 = 3\n#### 3"}]


def test_presets_are_offered_as_datasets(service: StudioService) -> None:  # noqa: F811
    names = [value for _, value in dataset_choices(service)]
    assert {"task:gsm8k", "task:math500", "task:gpqa_diamond"} <= set(names)


def test_picking_a_preset_previews_it_and_sets_its_metric(service: StudioService, hub_cache: Path) -> None:  # noqa: F811
    prefill(hub_cache, "openai/gsm8k", "main", {"test": GSM8K_ROWS})
    tab = build_tab(service)
    v, h = tab.view, tab.handlers
    form = initial_form(tab)
    form[v.editor_yaml] = VOTE
    apply(form, h.on_select(form))
    form[v.dataset] = "task:gsm8k"
    out = h.on_dataset(form)
    assert out[v.metric]["value"] == "number"
    assert "2 rows" in out[v.dataset_info] and "All 2 rows fill the inputs" in out[v.check]
    preview = out[v.preview]["value"]
    answers = [row[preview["headers"].index("answer")] for row in preview["data"]]
    assert answers == ["7", "3"]


def test_a_typed_hub_dataset_loads_from_the_cache(service: StudioService, hub_cache: Path) -> None:  # noqa: F811
    prefill(hub_cache, "openai/gsm8k", "main", {"test": GSM8K_ROWS})
    preview = service.evaluations.preview("hf:openai/gsm8k:main@test")
    assert preview["count"] == 2 and preview["columns"] == ["question", "answer"]


def test_shared_app_visitors_get_no_hub_datasets_nor_presets(service: StudioService) -> None:  # noqa: F811
    evals: Any = service.evaluations
    evals.policy = type(evals.policy)(**{**evals.policy.__dict__, "share_mode": True})
    assert evals.tasks() == []
    with pytest.raises(UserError, match="not available on a shared app"):
        evals.dataset_path("hf:openai/gsm8k:main@test", visitor="v1")
    with pytest.raises(UserError, match="shared app"):
        evals.plan({"workflows": [{"name": "x", "yaml": VOTE}], "dataset": "task:gsm8k"}, visitor="v1")


def test_check_the_grader_grades_the_presets_gold_answers(service: StudioService, hub_cache: Path) -> None:  # noqa: F811
    """The button beside the dataset picker: the picked preset's own gold answers through its metric."""
    rows = [*GSM8K_ROWS, {"question": "Broken row", "answer": "no marker here"}]
    prefill(hub_cache, "openai/gsm8k", "main", {"test": rows})
    tab = build_tab(service)
    v, h = tab.view, tab.handlers
    form = initial_form(tab)
    form[v.dataset] = "task:gsm8k"
    out = h.on_check_grader(form)
    assert 'data-correct="2" data-total="3"' in out[v.check] and "item 2:" in out[v.check]
    form[v.limit] = 2
    assert 'data-ok="true"' in h.on_check_grader(form)[v.check]
    form[v.dataset] = "arithmetic.jsonl"
    out = h.on_check_grader(form)
    assert out[v.check] == "" and "Pick a task preset" in out[v.message]
    evals: Any = service.evaluations
    evals.policy = type(evals.policy)(**{**evals.policy.__dict__, "share_mode": True})
    with pytest.raises(UserError, match="shared app"):
        evals.check_gold("task:gsm8k")


def test_check_the_grader_and_the_plan_read_an_uploaded_copy_of_a_presets_rows(service: StudioService) -> None:  # noqa: F811
    """Offline, a preset's rows come from a file: uploaded, picked as the Dataset, the preset picked in the Task
    preset list; the grader check grades its gold answers and an evaluation's plan reads it through the preset."""
    from tests.eval.humaneval_data import problems

    rows = problems()[:3]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    added = service.evaluations.upload_dataset("humaneval_copy.jsonl", data)
    tab = build_tab(service)
    v, h = tab.view, tab.handlers
    form = initial_form(tab)
    form[v.editor_yaml] = VOTE
    apply(form, h.on_select(form))
    assert ("humaneval" in {value for _, value in h.on_select(form)[v.task]["choices"]})
    form[v.dataset] = added["name"]
    assert "Pick a task preset in the Task preset list" in h.on_check_grader(form)[v.message]
    form[v.task] = "humaneval"
    assert h.on_task(form)[v.metric]["value"] == "tests"
    out = h.on_check_grader(form)
    assert 'data-correct="3" data-total="3"' in out[v.check], out
    request = h.request(form)
    assert request["task"] == "humaneval" and request["dataset"] == added["name"]
    plan = service.evaluations.plan({**request, "metric": "exact"})
    assert plan.task == "humaneval" and len(plan.dataset.rows) == 3
    assert "tests" in plan.dataset.columns
