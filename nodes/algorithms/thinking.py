"""Pure text parts of thinking budgets: splitting a thinking block off an answer, the s1 "Wait", the tags' checks."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

DEFAULT_THINK_TAGS = ("<think>", "</think>")
WAIT = "Wait"
"""What replaces an early close of the thinking block (s1's budget forcing: "ignore the end and append Wait")."""
MAX_TAG_CHARS = 64


def split_thinking(text: str, open_tag: str, close_tag: str, *, opened: bool = False) -> tuple[str, str]:
    """(thinking, answer) of a completion. With `opened` the prompt already opened the block, so the text up to
    the close tag is thinking; otherwise only a completion that starts with the open tag thinks. A block that is
    never closed is all thinking (no answer). The tags are matched as plain text."""
    body = text
    if not opened:
        stripped = text.lstrip()
        if not stripped.startswith(open_tag):
            return "", text
        body = stripped[len(open_tag):]
    end = body.find(close_tag)
    if end < 0:
        return body.strip(), ""
    return body[:end].strip(), body[end + len(close_tag):].strip()


def without_stray_tags(answer: str, open_tag: str, close_tag: str) -> str:
    """The answer with no think tag left in it (a small model writes a stray `</think>` into its answer): a whole
    block inside it is thinking and goes; after a lone close tag the answer is what follows it (what precedes it
    when nothing does), before a lone open tag what precedes it (what follows when nothing does)."""
    if open_tag not in answer and close_tag not in answer:
        return answer
    text = answer
    while (start := text.find(open_tag)) >= 0 and (end := text.find(close_tag, start + len(open_tag))) >= 0:
        text = text[:start] + " " + text[end + len(close_tag):]
    if close_tag in text:
        before, _, after = text.rpartition(close_tag)
        text = after if after.strip() else before
    if open_tag in text:
        before, _, after = text.partition(open_tag)
        text = before if before.strip() else after
    return text.replace(open_tag, " ").replace(close_tag, " ").strip()


def with_wait(thinking: str) -> str:
    """The thinking so far with "Wait" appended on a new line, to continue after an early close."""
    return thinking + ("" if not thinking or thinking[-1].isspace() else "\n") + WAIT


def tags_problem(tags: Any) -> str | None:
    """Why `tags` cannot be think_tags (an open and a close text), or None."""
    if not isinstance(tags, Sequence) or isinstance(tags, str) or len(tags) != 2 \
            or not all(isinstance(t, str) for t in tags):
        return "must be two texts, the open and the close tag, e.g. ['<think>', '</think>']"
    open_tag, close_tag = tags
    if not open_tag.strip() or not close_tag.strip():
        return "the open and close tags must not be empty or blank"
    if open_tag == close_tag:
        return "the open and close tags must differ"
    if max(len(open_tag), len(close_tag)) > MAX_TAG_CHARS:
        return f"a tag may have at most {MAX_TAG_CHARS} characters"
    return None
