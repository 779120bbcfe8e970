"""A workflow's `tags:` (when to use it: what it needs, which task it suits): the vocabulary and its checks."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from app.workflow.problems import Issue

TAG_VOCABULARY: dict[str, dict[str, str]] = {
    "needs": {
        "none": "only the generating model",
        "verifier": "a way to score answers: a reward model, a process reward model or a model judge",
        "tests": "example tests of each problem (code: `public_tests`) to select with",
    },
    "task": {
        "math": "a short final answer that can be checked (a number, a choice)",
        "code": "a program, graded by running it",
        "open": "free text (writing, instructions): no single right answer to vote on",
        "tools": "tool calls (an agent's actions): the tools and conversation in, calls out",
    },
}
"""Each tag key with its allowed values and what each means (the gallery shows the meaning)."""

TagValue = str | list[str]


def tag_values(tags: dict[str, TagValue], key: str) -> list[str]:
    """The values of one tag as a list (`task: math` and `task: [math]` alike); [] when absent."""
    value = tags.get(key)
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def _allowed(key: str) -> str:
    return ", ".join(TAG_VOCABULARY[key])


def parse_tags(raw: Any, line: Callable[..., int | None]) -> tuple[dict[str, TagValue], list[Issue]]:
    """The tags of a workflow's `tags:` mapping and the problems found (`line(*path)` places them): each key one of
    TAG_VOCABULARY's, each value one of its words or a list of them. Bad entries are left out of the result."""
    if raw is None:
        return {}, []
    if not isinstance(raw, dict):
        return {}, [Issue("bad_structure", f"tags must be a mapping (e.g. {{needs: none, task: math}}), got "
                          f"{type(raw).__name__}", f"write tags as key: value lines; keys: {', '.join(TAG_VOCABULARY)}",
                          line=line("tags"))]
    tags: dict[str, TagValue] = {}
    issues: list[Issue] = []
    for key, value in raw.items():
        if key not in TAG_VOCABULARY:
            issues.append(Issue("unknown_tag", f"unknown tag {key!r}",
                                f"tag keys: {', '.join(TAG_VOCABULARY)}; check the spelling or remove it",
                                line=line("tags", key)))
            continue
        words = value if isinstance(value, list) else [value]
        bad = [w for w in words if not isinstance(w, str) or w not in TAG_VOCABULARY[key]]
        if bad or not words:
            shown = ", ".join(repr(w) for w in bad) or "an empty list"
            issues.append(Issue("bad_tag", f"tag {key!r} cannot be {shown}",
                                f"write one of {_allowed(key)} (or a list of them, e.g. [{_allowed(key)}])",
                                line=line("tags", key)))
            continue
        tags[key] = list(words) if isinstance(value, list) else value
    return tags, issues
