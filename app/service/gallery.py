"""The strategy gallery: each example workflow as a card (title, gist, when to use it, cost, measured figure, graph)."""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path
from typing import Any

from app.eval.estimate import workflow_cost
from app.viz.workflow_graph import workflow_svg
from app.workflow.problems import WorkflowError
from app.workflow.spec import Workflow, load_workflow
from app.workflow.tags import TAG_VOCABULARY, tag_values
from nodes.registry import NodeRegistry

log = logging.getLogger(__name__)

MEASURED_FILE = "measured.json"
"""Beside the examples: the figures `benchmarks/bench_strategies.py --only gallery_figures` measured on a bundled
dataset (never typed by hand). An example it does not list shows no measured figure."""
GIST_CHARS = 150
MODEL_JUDGED_VOTES = ("genselect", "tournament")
"""Voter methods that call the model: the static cost leaves them out, so it is a lower bound there."""

_SENTENCE_END = re.compile(r"(?<!\bal)(?<!\be\.g)(?<!\bi\.e)\.\s+(?=[A-Z(])")


def gist(description: str, limit: int = GIST_CHARS) -> str:
    """The first sentence of a description, on one line, cut at a word boundary to `limit` characters."""
    text = " ".join(description.split())
    first = _SENTENCE_END.split(text, maxsplit=1)[0].rstrip(".")
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0].rstrip(",;:(")
    return cut + "…"


def read_measured(folder: Path) -> dict[str, Any]:
    """The measured-figures file of an examples folder ({"examples": {name: figure}, ...}); {} when it is missing,
    and {} with a warning in the log when it cannot be read (the gallery then shows no figures)."""
    path = folder / MEASURED_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        log.warning("the gallery's measured figures (%s) cannot be read: %s", path, exc)
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("examples"), dict):
        log.warning("the gallery's measured figures (%s) have no `examples` mapping; ignored", path)
        return {}
    return data


def _cost(wf: Workflow, registry: NodeRegistry) -> dict[str, Any]:
    calls, tokens = workflow_cost(wf, registry)
    partial = any(n.kind == "workflow" or (n.kind == "voter" and n.params.get("method") in MODEL_JUDGED_VOTES)
                  for n in wf.nodes)
    return {"calls": calls, "max_tokens": tokens, "lower_bound": partial}


def _measured(name: str, measured: dict[str, Any]) -> dict[str, Any] | None:
    figure = measured.get("examples", {}).get(name)
    if not isinstance(figure, dict) or figure.get("accuracy") is None:
        return None
    return {**figure, "model": figure.get("model") or measured.get("model", ""),
            "date": figure.get("date") or measured.get("date", "")}


def card(name: str, wf: Workflow, registry: NodeRegistry, measured: dict[str, Any]) -> dict[str, Any]:
    """One example's card: what the gallery shows of it."""
    tags = {key: tag_values(wf.tags, key) for key in TAG_VOCABULARY if tag_values(wf.tags, key)}
    return {
        "name": name, "title": wf.name, "gist": gist(wf.description), "description": wf.description,
        "tags": tags, "tag_notes": {f"{k}: {v}": TAG_VOCABULARY[k][v] for k, vs in tags.items() for v in vs},
        "cost": _cost(wf, registry), "measured": _measured(name, measured), "svg": workflow_svg(wf.to_dict()),
    }


class Gallery:
    """The cards of one examples folder, built again only when a file of it changed."""

    def __init__(self, folder: Path | None, registry: NodeRegistry) -> None:
        self.folder = Path(folder) if folder is not None else None
        self.registry = registry
        self._lock = threading.Lock()
        self._key: tuple[Any, ...] | None = None
        self._cards: list[dict[str, Any]] = []

    def _files(self) -> list[Path]:
        if self.folder is None or not self.folder.is_dir():
            return []
        return sorted(self.folder.glob("*.yaml"))

    def _version(self, files: list[Path]) -> tuple[Any, ...]:
        stamps = []
        for path in [*files, *([self.folder / MEASURED_FILE] if self.folder else [])]:
            try:
                stamps.append((path.name, path.stat().st_mtime_ns))
            except OSError:
                stamps.append((path.name, None))
        return tuple(stamps)

    def cards(self) -> list[dict[str, Any]]:
        """Every example that loads, as a card (an example that does not load is left out, with a log line)."""
        files = self._files()
        key = self._version(files)
        with self._lock:
            if key == self._key:
                return self._cards
            measured = read_measured(self.folder) if self.folder else {}
            cards = []
            for path in files:
                try:
                    cards.append(card(path.stem, load_workflow(path), self.registry, measured))
                except WorkflowError as exc:
                    log.warning("example %s left out of the gallery: %s", path.name, exc)
            self._key, self._cards = key, cards
            return cards
