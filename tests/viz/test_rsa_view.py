"""The Refinement view draws recursive self-aggregation's lineage: rounds as columns, a line per parent."""

from __future__ import annotations

import re

from app import viz
from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.traces import TraceStore
from app.viz.rsa import lineage_svg
from app.workflow.spec import workflow_from_dict
from nodes.registry import default_registry


def test_the_lineage_is_drawn_from_the_trace(trace_store: TraceStore) -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "What is 3 + 4?"}},
        "nodes": [{"id": "r", "kind": "refiner", "inputs": {"question": "inputs.question"},
                   "params": {"prompt": "{question}", "method": "rsa", "population": 3, "subset": 2, "rounds": 2}}],
        "outputs": {"c": "r.candidates"}})
    result = Scheduler(default_registry(), fake_provider()).run(wf, observers=[trace_store])
    record = trace_store.get_run(result.run_id)
    html = viz.refinement_html(record)
    assert "Recursive self-aggregation of r" in html and "<svg" in html
    edges = re.findall(r'data-from="([\d.]+)" data-to="([\d.]+)"', html)
    assert len(edges) == 2 * 2 * 3  # two rounds of three candidates, two parents each
    assert all(int(a.split(".")[0]) + 1 == int(b.split(".")[0]) for a, b in edges)
    assert len(re.findall(r'class="mg-rsa-node"', html)) == 9


def test_the_final_population_is_outlined() -> None:
    svg = lineage_svg({"generations": [[{"id": "0.0", "text": "a", "parents": []}],
                                       [{"id": "1.0", "text": "<b>", "parents": ["0.0"]}]], "final": ["1.0"]})
    assert svg.count("#e6a700") == 1 and "&lt;b&gt;" in svg and "round 1" in svg
