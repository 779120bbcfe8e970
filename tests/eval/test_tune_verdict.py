"""tune's verdict line quotes the held-out comparison whole: a label with spaces, and the sentences that do not
start with a label ("no difference detectable ..."), keep every word (round 6 cut the first word off)."""

from __future__ import annotations

from app.eval.tune.report import verdict


def test_the_held_out_sentence_is_quoted_whole() -> None:
    main = {"n": 40, "sentence": "self_consistency · think.n=3 beats greedy by 7.5 points [1.2, 13.8], p = 0.02"}
    line = verdict("self_consistency · think.n=3", "greedy", "best on dev", main)
    assert "on held-out test, self_consistency · think.n=3 beats greedy by 7.5 points" in line
    undetected = {"n": 12, "sentence": "no difference detectable with 12 items (+0.0 points [-9.0, 9.0], p = 1.00)"}
    assert "on held-out test, no difference detectable with 12 items" in verdict("a b", "greedy", "why", undetected)


def test_no_test_items_and_greedy_itself() -> None:
    assert verdict("x", "greedy", "why", {"n": 0, "sentence": ""}).endswith("no test items.")
    assert verdict("chain_of_thought", "chain_of_thought", "nothing beat it", {}) == (
        "Recommended: greedy chain_of_thought. Nothing beat it.")
