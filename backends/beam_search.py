"""Token-level beam search and diverse beam search (Vijayakumar et al.) as bookkeeping over expansions: which
beams live on, which finish, the tree they grew; the engine and the fake backend feed it log-probabilities."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from backends.base import BackendError, Usage

Expansion = Sequence[tuple[int, float]]
"""A beam's next-token candidates as (token, log-probability), best first, only tokens allowed there."""


@dataclass(frozen=True)
class BeamSettings:
    """One beam request: n beams returned (the width), split into `groups` of n / groups beams each."""

    n: int = 4
    length_penalty: float = 1.0
    """alpha: a hypothesis scores sum logprob / length^alpha (length = generated tokens, the end token included)."""
    groups: int = 1
    """Diverse beam search's G (it divides n)."""
    diversity_penalty: float = 0.0
    """lambda: a token chosen at this step by an earlier group costs lambda per time it was chosen (Hamming)."""
    max_tokens: int = 128

    @property
    def width(self) -> int:
        return self.n // self.groups

    def candidates_per_beam(self) -> int:
        """Raw candidates a beam needs: 2 x width, plus the tokens the diversity penalty may push down."""
        return 2 * self.width + (self.n if self.diversity_penalty > 0 else 0)


def beam_settings_problems(s: BeamSettings) -> list[str]:
    problems = []
    if s.n < 1:
        problems.append(f"n must be >= 1, got {s.n}")
    if s.groups < 1 or s.n % s.groups:
        problems.append(f"diverse_groups ({s.groups}) must divide n ({s.n})")
    if s.diversity_penalty < 0:
        problems.append(f"diversity_penalty must be >= 0, got {s.diversity_penalty}")
    if s.max_tokens < 1:
        problems.append(f"max_tokens must be >= 1 for beam search, got {s.max_tokens}")
    return problems


def check_beam_settings(s: BeamSettings) -> None:
    problems = beam_settings_problems(s)
    if problems:
        raise BackendError("Bad beam settings: " + "; ".join(problems) + ".")


def beam_score(logprob: float, length: int, alpha: float) -> float:
    """The length-penalised sequence log-probability."""
    return logprob / (max(length, 1) ** alpha)


@dataclass
class Beam:
    """A live (or finished) hypothesis: a node of the beam tree."""

    id: int
    parent: int
    group: int
    tokens: list[int]
    logprob: float
    finish: str | None = None
    text: str = ""

    def score(self, alpha: float) -> float:
        return beam_score(self.logprob, len(self.tokens), alpha)


@dataclass
class BeamHypothesis:
    """One returned candidate, best first in BeamResult."""

    text: str
    tokens: list[int]
    logprob: float
    score: float
    group: int
    finish_reason: str
    beam_id: int


@dataclass
class BeamResult:
    prompt_text: str
    hypotheses: list[BeamHypothesis]
    tree: dict[str, Any] = field(default_factory=dict)
    """{"nodes": [{"id", "parent", "step", "group", "token", "logprob", "score", "status"}], "steps": int}:
    status "kept" (an ancestor of a returned hypothesis or one itself), "finished" (ended but not returned) or
    "pruned"."""
    usage: Usage = field(default_factory=Usage)


class BeamSearch:
    """The search state. Each step the caller expands every live beam (`expand`) and gets back the new live beams
    with their parents; `finish_beam` ends one early (a stop string); `done` says when to stop."""

    def __init__(self, settings: BeamSettings, is_end: Callable[[int], bool]) -> None:
        check_beam_settings(settings)
        self.s = settings
        self.is_end = is_end
        self._next_id = 0
        self.nodes: list[dict[str, Any]] = []
        self.beams: dict[int, Beam] = {}
        self.live: list[Beam] = [self._new(-1, g, [], 0.0, 0) for g in range(settings.groups)]
        """Step 0: one empty root per group (all of them read the prompt's last logits)."""
        self.finished: list[list[Beam]] = [[] for _ in range(settings.groups)]
        self.step = 0

    def _new(self, parent: int, group: int, tokens: list[int], logprob: float, step: int,
             token: int | None = None, token_logprob: float = 0.0) -> Beam:
        beam = Beam(self._next_id, parent, group, tokens, logprob)
        self._next_id += 1
        self.beams[beam.id] = beam
        self.nodes.append({"id": beam.id, "parent": parent, "step": step, "group": group, "token": token,
                           "logprob": round(token_logprob, 5),
                           "score": round(beam.score(self.s.length_penalty), 5) if tokens else 0.0})
        return beam

    def expand(self, expansions: dict[int, Expansion]) -> list[Beam]:
        """Choose the next beams of every group from the live beams' candidates (keyed by beam id); returns the new
        live beams (each with its parent's id). Hypotheses ending here go to the finished lists."""
        self.step += 1
        chosen_tokens: dict[int, int] = {}
        new_live: list[Beam] = []
        for group in range(self.s.groups):
            scored: list[tuple[float, float, int, Beam, int, float]] = []
            for beam in (b for b in self.live if b.group == group):
                for token, lp in expansions.get(beam.id, ()):
                    total = beam.logprob + lp
                    key = total - self.s.diversity_penalty * chosen_tokens.get(token, 0)
                    scored.append((key, total, len(scored), beam, token, lp))
            scored.sort(key=lambda c: (-c[0], c[2]))
            kept = 0
            for rank, (_key, total, _i, parent, token, lp) in enumerate(scored):
                if kept >= self.s.width:
                    break
                if self.is_end(token):
                    if rank < self.s.width:  # an end ranked among the best `width` is a finished hypothesis
                        self._finish(self._new(parent.id, group, [*parent.tokens, token], total, self.step, token,
                                               lp), "eog")
                    continue
                child = self._new(parent.id, group, [*parent.tokens, token], total, self.step, token, lp)
                chosen_tokens[token] = chosen_tokens.get(token, 0) + 1
                kept += 1
                if len(child.tokens) >= self.s.max_tokens:
                    self._finish(child, "length")
                else:
                    new_live.append(child)
        self.live = new_live
        return new_live

    def _finish(self, beam: Beam, reason: str) -> None:
        beam.finish = reason
        self.finished[beam.group].append(beam)

    def finish_beam(self, beam: Beam, reason: str, text: str) -> None:
        """End a live beam outside the search (a stop string matched; `text` cut before it)."""
        beam.text = text
        self.live = [b for b in self.live if b.id != beam.id]
        self._finish(beam, reason)

    def done(self) -> bool:
        """No live beams, or every group has `width` finished hypotheses none of its live beams can beat."""
        if not self.live:
            return True
        alpha = self.s.length_penalty
        for group in range(self.s.groups):
            done = sorted((b.score(alpha) for b in self.finished[group]), reverse=True)
            live = [b for b in self.live if b.group == group]
            if not live:
                continue
            if len(done) < self.s.width:
                return False
            worst_kept = done[self.s.width - 1]
            if any(self._best_possible(b) > worst_kept for b in live):
                return False
        return True

    def _best_possible(self, beam: Beam) -> float:
        """An upper bound on any hypothesis grown from `beam`: more tokens only lower the log-probability, and with
        alpha > 0 the longest allowed length divides it most."""
        alpha = self.s.length_penalty
        if alpha > 0 and beam.logprob < 0:
            return beam_score(beam.logprob, self.s.max_tokens, alpha)
        return beam.score(alpha)

    def best(self, text_of: Callable[[Beam], str]) -> list[BeamHypothesis]:
        """The returned hypotheses: each group's `width` best finished ones (live ones cut short count when a group
        has too few), all sorted best first; marks the tree's statuses."""
        alpha = self.s.length_penalty
        out: list[Beam] = []
        for group in range(self.s.groups):
            pool = self.finished[group] + [b for b in self.live if b.group == group]
            pool.sort(key=lambda b: (-b.score(alpha), b.id))
            out += pool[: self.s.width]
        out.sort(key=lambda b: (-b.score(alpha), b.id))
        self._mark_tree(out)
        return [BeamHypothesis(text=b.text or text_of(b), tokens=[t for t in b.tokens if not self.is_end(t)],
                               logprob=b.logprob, score=b.score(alpha), group=b.group,
                               finish_reason=b.finish or "length", beam_id=b.id) for b in out]

    def _mark_tree(self, kept: list[Beam]) -> None:
        keep: set[int] = set()
        for beam in kept:
            node_id = beam.id
            while node_id >= 0 and node_id not in keep:
                keep.add(node_id)
                node_id = self.beams[node_id].parent
        for node in self.nodes:
            beam = self.beams[node["id"]]
            node["status"] = "kept" if node["id"] in keep else "finished" if beam.finish else "pruned"

    def tree(self, piece: Callable[[int], str]) -> dict[str, Any]:
        """The beam tree for the trace, each node's token also as text (`piece`)."""
        for node in self.nodes:
            node["text"] = piece(node["token"]) if node["token"] is not None else ""
        return {"nodes": self.nodes, "steps": self.step, "n": self.s.n, "groups": self.s.groups,
                "length_penalty": self.s.length_penalty, "diversity_penalty": self.s.diversity_penalty}
