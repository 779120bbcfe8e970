"""The strategy gallery's data (app.service.gallery): a card per example with its gist, tags, cost, graph picture
and the figure the benchmarks measured (read from the file they write, none where it has none)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from app.service.gallery import MEASURED_FILE, Gallery, gist, read_measured
from app.workflow.spec import load_workflow
from nodes.registry import default_registry

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    folder = tmp_path / "examples"
    folder.mkdir()
    for name in ("self_consistency", "code_best_of_n", "chain_of_thought"):
        shutil.copy(WORKFLOWS / f"{name}.yaml", folder)
    return folder


def test_gist_is_the_first_sentence_on_one_line() -> None:
    assert gist("Self-consistency (Wang et al. 2023): sample several\nchains. Then vote.") == \
        "Self-consistency (Wang et al. 2023): sample several chains"
    assert gist("One line only") == "One line only"
    long = "word " * 60
    cut = gist(long, limit=40)
    assert cut.endswith("…") and len(cut) <= 41 and "  " not in cut


def test_every_example_is_a_card_with_tags_cost_and_graph() -> None:
    cards = Gallery(WORKFLOWS, default_registry()).cards()
    assert [c["name"] for c in cards] == sorted(p.stem for p in WORKFLOWS.glob("*.yaml"))
    by_name = {c["name"]: c for c in cards}
    sc = by_name["self_consistency"]
    assert sc["title"] == "self-consistency" and sc["gist"].startswith("Self-consistency (Wang et al. 2023)")
    assert "\n" not in sc["gist"] and len(sc["gist"]) <= 151
    assert sc["tags"] == {"needs": ["none"], "task": ["math"]}
    assert sc["tag_notes"]["needs: none"] == "only the generating model"
    sampler = next(n for n in load_workflow(WORKFLOWS / "self_consistency.yaml").nodes if n.kind == "sampler")
    assert sc["cost"]["calls"] == sampler.params["n"]
    assert sc["cost"]["max_tokens"] == sampler.params["n"] * sampler.params["max_tokens"]
    assert sc["svg"].startswith("<svg") and "sampler" in sc["svg"]
    assert by_name["code_best_of_n"]["tags"] == {"needs": ["tests"], "task": ["code"]}
    assert by_name["judge_of_methods"]["cost"]["lower_bound"]  # its strategies run as sub-workflows
    assert not sc["cost"]["lower_bound"]


def test_the_measured_figure_comes_from_the_benchmarks_file_and_only_there(examples: Path) -> None:
    gallery = Gallery(examples, default_registry())
    assert all(c["measured"] is None for c in gallery.cards())  # no file: no figure anywhere
    figure = {"dataset": "arithmetic.jsonl", "metric": "number", "items": 20, "accuracy": 0.35, "ci": [0.18, 0.57],
              "tokens_per_item": 512.5, "calls_per_item": 8.0, "date": "2026-11-28",
              "source": "bench_strategies.py gallery_figures --limit 20"}
    (examples / MEASURED_FILE).write_text(json.dumps({"model": "SmolLM2 (bundled, CPU)",
                                                      "examples": {"self_consistency": figure}}))
    cards = {c["name"]: c for c in gallery.cards()}  # the file changed: the cards are built again
    assert cards["self_consistency"]["measured"] == {**figure, "model": "SmolLM2 (bundled, CPU)"}
    assert cards["code_best_of_n"]["measured"] is None and cards["chain_of_thought"]["measured"] is None


def test_a_broken_measured_file_shows_no_figures_and_breaks_nothing(examples: Path) -> None:
    (examples / MEASURED_FILE).write_text("{not json")
    assert read_measured(examples) == {}
    cards = Gallery(examples, default_registry()).cards()
    assert len(cards) == 3 and all(c["measured"] is None for c in cards)
    (examples / MEASURED_FILE).write_text(json.dumps({"examples": {"self_consistency": {"accuracy": None}}}))
    assert all(c["measured"] is None for c in Gallery(examples, default_registry()).cards())


def test_an_example_that_does_not_load_is_left_out(examples: Path) -> None:
    (examples / "broken.yaml").write_text("version: 1\nnodes: [\n")
    names = [c["name"] for c in Gallery(examples, default_registry()).cards()]
    assert names == ["chain_of_thought", "code_best_of_n", "self_consistency"]


def test_cards_are_built_again_only_when_a_file_changed(examples: Path) -> None:
    gallery = Gallery(examples, default_registry())
    first = gallery.cards()
    assert gallery.cards() is first
    path = examples / "chain_of_thought.yaml"
    path.write_text(path.read_text().replace("name: chain-of-thought", "name: chain-of-thought-2"))
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert {c["title"] for c in gallery.cards()} >= {"chain-of-thought-2"}
