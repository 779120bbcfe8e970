"""Fuzz: `?wf=` payloads (random, mutated, zip bombs, foreign streams), page queries and run ids. The decoder
answers a workflow or a DeepLinkError; read_deep_link never raises; encode/decode is a round trip."""

from __future__ import annotations

from pathlib import Path

from tests.fuzz.targets import TARGETS, run_property


def test_links_open_or_are_refused_with_a_deep_link_error(tmp_path: Path) -> None:
    run_property(TARGETS["deeplink"], tmp_path)
