"""Adaptive stopping and search-tree bookkeeping."""

from __future__ import annotations

from nodes.algorithms.adaptive import batch_plan, stop_decision
from nodes.algorithms.beam import Frontier, SearchTree


def test_stop_once_the_leader_cannot_be_caught() -> None:
    # 5 of 8 drawn, all "1": runner-up 0, remaining 3 -> 5 - 0 > 3: stop
    assert stop_decision(["1"] * 5, total=8).stop
    # 4 drawn: 4 - 0 > 4 is false: the 4 remaining could still tie
    assert not stop_decision(["1"] * 4, total=8).stop


def test_stop_accounts_for_the_runner_up_and_no_answers() -> None:
    decision = stop_decision(["1", "2", "1", None, "1"], total=7)
    assert (decision.leader, decision.leader_count, decision.runner_up_count, decision.remaining) == ("1", 3, 1, 2)
    assert not decision.stop  # 3 - 1 = 2, not > 2
    assert stop_decision(["1", "2", "1", None, "1", "1"], total=7).stop  # 4 - 1 > 1


def test_min_samples_and_exhaustion() -> None:
    assert not stop_decision(["1", "1", "1"], total=4, min_samples=4).stop
    assert stop_decision([None, None], total=2).stop  # nothing left to draw
    assert not stop_decision([None, None], total=5).stop
    assert stop_decision([], total=0).stop


def test_batch_plan() -> None:
    assert batch_plan(8, 2, 3) == [3, 2, 2, 1]
    assert batch_plan(8, 4, 4) == [4, 4]
    assert batch_plan(3, 4, 1) == [3]
    assert batch_plan(0, 4, 1) == []


def test_tree_paths_beams_and_chosen_path() -> None:
    tree = SearchTree()
    a = tree.add(0, "step a")
    b = tree.add(0, "step b")
    a1 = tree.add(a.id, "a1", terminal=True, finish="end_marker")
    a.score, b.score, a1.score = 0.9, 0.4, 0.7
    assert tree.solution(a1.id, "\n") == "step a\na1"
    assert [n.depth for n in (a, b, a1)] == [1, 1, 2]
    kept = tree.select([a, b], 1)
    assert kept == [a] and b.pruned
    assert tree.mark_chosen(a1.id) == [0, a.id, a1.id]
    assert tree.problems() == []
    data = tree.to_json()
    assert data["chosen_path"] == [0, 1, 3]
    assert [n["pruned"] for n in data["nodes"]] == [False, False, True, False]


def test_ranking_ties_go_to_the_earlier_node_and_unscored_rank_last() -> None:
    tree = SearchTree()
    x, y, z = tree.add(0, "x"), tree.add(0, "y"), tree.add(0, "z")
    x.score, y.score = 0.5, 0.5
    assert tree.best([z, y, x]) is x
    frontier = Frontier()
    for n in (z, y, x):
        frontier.push(n)
    assert [frontier.pop() for _ in range(3)] == [x, y, z]


def test_problems_spot_an_inconsistent_tree() -> None:
    tree = SearchTree()
    a = tree.add(0, "a")
    a.chosen = True  # root not chosen
    a.depth = 5
    assert len(tree.problems()) == 2
