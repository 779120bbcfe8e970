"""The Traces tab's tree view draws a token-level beam search: states per step, pruned beams greyed, the
returned hypotheses' paths chosen."""

from __future__ import annotations

from typing import Any

from app.viz.tree import search_tree_figure, tree_html, tree_nodes, tree_nodes_ids


def test_the_diverse_beam_example_draws_its_beam_tree(example_records: dict[str, dict[str, Any]]) -> None:
    record = example_records["diverse_beam"]
    assert tree_nodes_ids(record) == ["beams"]
    owner, states = tree_nodes(record)  # type: ignore[misc]
    assert owner == "beams"
    roots = [s for s in states if s["parent"] is None]
    assert len(roots) == 3 and all(s["depth"] == 0 for s in roots)
    by_id = {s["id"]: s for s in states}
    for s in states:
        if s["parent"] is not None:  # a state's text extends its parent's by one token
            assert s["text"].startswith(by_id[s["parent"]]["text"]) or by_id[s["parent"]]["depth"] == 0
            assert s["depth"] == by_id[s["parent"]]["depth"] + 1
    assert any(s["pruned"] for s in states) and sum(1 for s in states if s["chosen"] and s["depth"]) >= 6
    fig = search_tree_figure(record)
    assert fig is not None and {t.name for t in fig.data} >= {"kept", "pruned"}
    html = tree_html(record)
    assert "Search tree of beams" in html and "opacity:.55" in html and "group 1" in html
