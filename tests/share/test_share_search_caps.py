"""Share mode caps the search strategies whose cost grows with one param: particles, MCTS simulations, AB-MCTS
steps."""

from __future__ import annotations

from typing import Any

import pytest

from app.share.policy import (
    SHARE_MAX_AB_EXPANSIONS,
    SHARE_MAX_PARTICLES,
    SHARE_MAX_SIMULATIONS,
    SharePolicy,
    check_workflow_allowed,
)
from app.workflow.spec import workflow_from_dict


def search_wf(**params: Any):
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": "3 + 4?"}},
        "nodes": [{"id": "s", "kind": "search", "params": {"prompt": "{question}", **params},
                   "inputs": {"question": "inputs.question"}}],
        "outputs": {"text": "s.text"}})


SHARED = SharePolicy.for_serving("0.0.0.0")


@pytest.mark.parametrize("params", [
    {"strategy": "particles", "particles": SHARE_MAX_PARTICLES + 1},
    {"strategy": "mcts", "simulations": SHARE_MAX_SIMULATIONS + 1},
    {"strategy": "ab_mcts", "max_expansions": SHARE_MAX_AB_EXPANSIONS + 1},
])
def test_over_the_cap_is_refused_in_share_mode_only(params: dict[str, Any]) -> None:
    wf = search_wf(**params)
    issues = check_workflow_allowed(wf, SHARED)
    assert [i.code for i in issues] == ["share_cap_exceeded"]
    assert issues[0].node_id == "s" and issues[0].hint
    assert check_workflow_allowed(wf, SharePolicy.local()) == []


def test_at_the_cap_or_another_strategy_passes() -> None:
    assert check_workflow_allowed(search_wf(strategy="particles", particles=SHARE_MAX_PARTICLES), SHARED) == []
    assert check_workflow_allowed(search_wf(strategy="mcts", simulations=SHARE_MAX_SIMULATIONS), SHARED) == []
    assert check_workflow_allowed(search_wf(strategy="ab_mcts", max_expansions=SHARE_MAX_AB_EXPANSIONS), SHARED) == []
    # the param only counts for its own strategy
    assert check_workflow_allowed(search_wf(strategy="beam", simulations=200), SHARED) == []
    assert check_workflow_allowed(search_wf(strategy="best_first", max_expansions=200), SHARED) == []
