"""Builders of sub-workflow trees for the fan-out and validation-cost tests and benchmarks (no LM call inside)."""

from __future__ import annotations

from pathlib import Path

LEAF = """\
version: 1
name: leaf
inputs:
  draft: {type: text, default: 'x'}
nodes:
- id: t
  kind: template
  params: {template: '[{draft}]'}
  inputs: {draft: inputs.draft}
outputs: {answer: t.text}
"""


def _write(folder: Path, name: str, text: str) -> None:
    (folder / f"{name}.yaml").write_text(text, encoding="utf-8")


def fanout_tree(folder: Path, width: int, depth: int) -> str:
    """`depth` levels, each a `collect` of `width` inputs mapped over the level below (width**depth leaf runs,
    width + width**2 + ... child runs in all); returns the top workflow's name."""
    _write(folder, "fan0", LEAF)
    wires = ", ".join(f"a{i}: inputs.draft" for i in range(width))
    for level in range(1, depth + 1):
        _write(folder, f"fan{level}", f"""\
version: 1
name: fan{level}
inputs:
  draft: {{type: text, default: 'x'}}
nodes:
- id: fan
  kind: collect
  inputs: {{{wires}}}
- id: each
  kind: workflow
  map: draft
  params: {{workflow: fan{level - 1}}}
  inputs: {{draft: fan.candidates}}
outputs: {{answer: each.candidates}}
""")
    return f"fan{depth}"


def wide_tree(folder: Path, uses: int, depth: int) -> str:
    """`depth` levels, each using the level below `uses` times (unmapped): uses**depth leaf instances, a handful of
    distinct children; returns the top workflow's name."""
    _write(folder, "wide0", LEAF)
    for level in range(1, depth + 1):
        nodes = "".join(f"""\
- id: u{i}
  kind: workflow
  params: {{workflow: wide{level - 1}}}
  inputs: {{draft: inputs.draft}}
""" for i in range(uses))
        _write(folder, f"wide{level}", f"""\
version: 1
name: wide{level}
inputs:
  draft: {{type: text, default: 'x'}}
nodes:
{nodes}outputs: {{answer: u0.answer}}
""")
    return f"wide{depth}"
