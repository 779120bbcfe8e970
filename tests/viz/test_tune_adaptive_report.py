"""The "Adaptive policy" section of a tune's report (app/viz/tune_adaptive.py), read off a real tune on the scripted
backend: present when the tune built a policy, absent otherwise; the figures shown are the result JSON's; every
string from the data escaped; the honest sentence follows the held-out comparison; the policy a point of its own on
the Pareto plot."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import pytest

from app.eval.tune.api import TuneOptions
from app.run.providers import fake_provider
from app.service.studio import StudioService
from app.viz.tune import tune_figure, tune_html
from app.viz.tune_adaptive import adaptive_html

WORKFLOW = """version: 1
name: {name}
models:
  main: {{source: fake}}
inputs:
  question: {{type: text, default: Q1}}
nodes:
- id: think
  kind: generator
  model: main
  params: {{prompt: '[{name}] {{question}}', max_tokens: 100}}
  inputs: {{question: inputs.question}}
outputs: {{answer: think.text}}
"""
HOSTILE = '<img src=x onerror="alert(1)">&'


def _reply(prompt: str, seed: int) -> str:
    """Greedy is right on the even (easy) items only, and its samples scatter on the odd (hard) ones; `big` is right
    everywhere at 60 words, over the budget alone: a policy can afford it on the hard bin only."""
    name = re.search(r"\[(\w+)\]", prompt).group(1)
    item = int(re.search(r"Q(\d+)", prompt).group(1))
    if name == "big":
        return " ".join(["so"] * 60) + f" Answer: {item}"
    return f"so Answer: {item + 1000 + seed % 7}" if item % 2 else f"so Answer: {item}"


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`TuneResult.to_json()` of an adaptive tune (40 items, two candidates, a 60-token budget)."""
    tmp = tmp_path_factory.mktemp("adaptive-report")
    examples = tmp / "examples"
    examples.mkdir()
    for name in ("chain_of_thought", "big"):
        (examples / f"{name}.yaml").write_text(WORKFLOW.format(name=name))
    data = tmp / "data.jsonl"
    data.write_text("".join(json.dumps({"question": f"Q{i}", "answer": str(i)}) + "\n" for i in range(40)))
    service = StudioService(provider=fake_provider(reply_fn=_reply), workflows_dir=tmp / "wf", examples_dir=examples,
                            trace_db=tmp / "traces.db")
    try:
        result = service.tune(TuneOptions(data=str(data), metric="number", budget_tokens=60,
                                          out=str(tmp / "out.yaml"), adaptive=True))
    finally:
        service.close()
    out = result.to_json()
    assert out["adaptive"]["status"] == "built", out["adaptive"]
    return out


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _row(html: str, testid: str) -> str:
    found = re.search(rf'<tr data-testid="{testid}">(.*?)</tr>', html, re.S)
    assert found, f"no {testid} row in {html}"
    return found.group(1)


def test_the_section_shows_the_jsons_bins_test_figures_and_comparisons(tuned: dict[str, Any]) -> None:
    adaptive = tuned["adaptive"]
    html = adaptive_html(tuned)
    assert "Adaptive policy (difficulty-routed)" in html
    assert f"{adaptive['probe']['tokens_per_item']:,.0f} tokens per item" in html  # the probe's cost
    bins = re.findall(r'<tr data-testid="tune-adaptive-bin">(.*?)</tr>', html, re.S)
    assert len(bins) == len(adaptive["branches"]) == 2
    for row, branch in zip(bins, adaptive["branches"], strict=True):
        cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
        assert cells[2:] == [str(branch["n"]), branch["label"], _pct(branch["accuracy"]),
                             f"{branch['tokens_per_item']:,.0f}"]
    cut = adaptive["bins"][0]
    assert f"score &lt; {cut:g} (hardest)" in bins[0] and f"score ≥ {cut:g} (easiest)" in bins[1]
    test = adaptive["test"]
    policy = _row(html, "tune-adaptive-test")
    assert f"{_pct(test['accuracy'])} ({_pct(test['ci'][0])}–{_pct(test['ci'][1])})" in policy
    assert f">{test['tokens_per_item']:,.0f}<" in policy and f">{test['n']}<" in policy
    single = _row(html, "tune-adaptive-single")
    assert adaptive["against"]["label"] in single
    assert _pct(adaptive["against"]["test"]["accuracy"]) in single
    main = adaptive["comparisons"][0]
    comparison = re.findall(r'<tr data-testid="tune-adaptive-comparison">(.*?)</tr>', html, re.S)[0]
    assert f"{100 * main['diff']:+.1f}" in comparison and f"{100 * main['ci'][0]:+.1f} to" in comparison
    assert 0.001 <= main["p"] < 0.05 and f">{main['p']:.2g}<" in comparison
    for path in adaptive["files"]:
        assert f"<code>{path}</code>" in html


def test_the_files_listed_are_the_policy_and_its_branches(tuned: dict[str, Any]) -> None:
    files = [Path(f) for f in tuned["adaptive"]["files"]]
    assert files[0] == Path(tuned["adaptive"]["path"])
    assert [f.name for f in files[1:]] == ["out-adaptive-bin0.yaml", "out-adaptive-bin1.yaml"]
    assert all(f.is_file() for f in files)


def test_the_honest_sentence_follows_the_held_out_comparison(tuned: dict[str, Any]) -> None:
    assert "beats the best single strategy at equal tokens" in adaptive_html(tuned)  # +50 points on 20 items
    flat = copy.deepcopy(tuned)
    flat["adaptive"]["comparison"].update(diff=0.05, p=0.5)
    html = adaptive_html(flat)
    assert "does not beat the best single strategy at equal tokens" in html and "+5.0 points, p = 0.50" in html
    worse = copy.deepcopy(tuned)
    worse["adaptive"]["comparison"].update(diff=-0.3, p=0.01)
    assert "does worse than the best single strategy" in adaptive_html(worse)


def test_the_section_is_absent_without_a_policy_and_says_why_when_none_was_built(tuned: dict[str, Any]) -> None:
    plain = {k: v for k, v in tuned.items() if k != "adaptive"}
    assert adaptive_html(plain) == "" and "Adaptive policy" not in tune_html(plain)
    none = {**plain, "adaptive": {"status": "none", "probe": tuned["adaptive"]["probe"],
                                  "reason": "no choice of candidate per bin keeps the policy within the budget"}}
    html = adaptive_html(none)
    assert "No adaptive policy was written: no choice of candidate per bin keeps" in html
    assert "tune-adaptive-test" not in html and "tokens per item" in html  # the probe's cost is still shown


def test_every_string_from_the_data_is_escaped(tuned: dict[str, Any]) -> None:
    hostile = copy.deepcopy(tuned)
    adaptive = hostile["adaptive"]
    adaptive["branches"][0]["label"] = HOSTILE
    adaptive["against"]["label"] = HOSTILE
    adaptive["comparisons"][0]["sentence"] = HOSTILE
    adaptive["files"] = [HOSTILE]
    adaptive["probe"]["score"] = HOSTILE
    hostile["baseline"]["label"] = HOSTILE
    for html in (adaptive_html(hostile), tune_html(hostile)):
        assert "<img" not in html and 'onerror="' not in html
        assert html.count("&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;") >= 5
    none = {"adaptive": {"status": "none", "reason": HOSTILE}}
    assert "<img" not in adaptive_html(none)


def test_the_report_page_and_the_plot_carry_the_policy(tuned: dict[str, Any]) -> None:
    page = tune_html(tuned)
    assert page.index("Held-out test") < page.index("Adaptive policy") < page.index("The race (dev)")
    test = tuned["adaptive"]["test"]
    traces = [t for t in tune_figure(tuned).data if t.name.startswith("adaptive policy")]
    assert len(traces) == 1
    assert list(traces[0].x) == [test["tokens_per_item"]] and list(traces[0].y) == [test["accuracy"]]
    assert traces[0].marker.symbol == "diamond"
    assert list(traces[0].error_y.arrayminus) == [pytest.approx(test["accuracy"] - test["ci"][0])]
    plain = {k: v for k, v in tuned.items() if k != "adaptive"}
    assert not [t for t in tune_figure(plain).data if t.name.startswith("adaptive policy")]
