"""metagen.evaluate(..., repeats=K) and Evaluation.compare / comparisons on the scripted fake backend."""

from __future__ import annotations

import pytest

import metagen

ROWS = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(6)]


def test_repeats_and_paired_comparisons(studio: metagen.Studio) -> None:
    wfs = [metagen.load("chain_of_thought"), metagen.load("self_consistency")]
    ev = metagen.evaluate(wfs, ROWS, metric="number", repeats=2, studio=studio, progress=False)
    assert ev.status == "succeeded" and len(ev.items) == 2 * 6 * 2
    assert {p["repeats"] for p in ev.points} == {2} and all(p["total"] == 12 for p in ev.points)
    assert sorted({i["repeat"] for i in ev.items}) == [0, 1] and max(i["item_idx"] for i in ev.items) == 5
    one = ev.compare("self-consistency", "chain-of-thought")
    accuracy = {p["workflow"]: p["accuracy"] for p in ev.points}
    assert one["n"] == 6 and one["method"] == "sign-flip"
    assert one["diff"] == pytest.approx(accuracy["self-consistency"] - accuracy["chain-of-thought"])
    assert one["ci"][0] <= one["diff"] <= one["ci"][1] and 0 < one["p_value"] <= 1
    flipped = ev.compare("chain-of-thought", "self-consistency")
    assert flipped["diff"] == pytest.approx(-one["diff"]) and flipped["p_value"] == pytest.approx(one["p_value"])
    frame = ev.comparisons()
    assert list(frame.columns)[:4] == ["a", "b", "n", "diff"] and len(frame) == 1
    assert frame.loc[0, "diff"] >= 0 and isinstance(frame.loc[0, "sentence"], str)
    with pytest.raises(ValueError, match="no point 'nope'"):
        ev.compare("nope", "chain-of-thought")
    with pytest.raises(ValueError, match="repeats"):
        metagen.evaluate(wfs, ROWS, metric="number", repeats=0, studio=studio, progress=False)
