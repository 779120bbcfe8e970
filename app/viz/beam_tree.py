"""A token-level beam search's "beam_tree" event as the search tree view's states: each beam step a state
holding the text so far, returned hypotheses and their ancestors chosen, pruned beams greyed."""

from __future__ import annotations

from typing import Any


def beam_tree_states(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The event's nodes (id, parent, step, group, text piece, logprob, score, status) as tree states."""
    states: list[dict[str, Any]] = []
    texts: dict[int, str] = {}
    for node in data.get("nodes") or []:
        node_id, parent = int(node["id"]), int(node.get("parent", -1))
        text = texts.get(parent, "") + str(node.get("text") or "")
        texts[node_id] = text
        step = int(node.get("step", 0))
        states.append({
            "id": str(node_id), "parent": str(parent) if parent >= 0 else None, "depth": step,
            "text": text if step else f"(prompt · group {node.get('group', 0)})",
            "score": node.get("score") if step else None, "pruned": node.get("status") == "pruned",
            "chosen": node.get("status") == "kept", "beam_group": node.get("group"),
            "token_logprob": node.get("logprob"),
        })
    return states
