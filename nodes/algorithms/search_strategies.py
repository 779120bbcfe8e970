"""Pure parts of the search strategies beyond beam: DVTS budget split, particle resampling, MCTS (UCT) arithmetic,
AB-MCTS's Thompson sampling over Beta / normal-inverse-gamma posteriors."""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass


def split_budget(total: int, parts: int) -> list[int]:
    """`total` expansions per round split over `parts` subtrees as evenly as possible, the remainder going to the
    first subtrees (DVTS: 8 = beam_width 2 x expand_k 4 over 3 subtrees -> [3, 3, 2]). Every part gets at least 1."""
    if parts < 1:
        raise ValueError("parts must be at least 1")
    base, extra = divmod(max(total, parts), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def softmax(scores: Sequence[float | None], temperature: float) -> list[float]:
    """Weights proportional to exp(score / temperature), summing to 1. An unscored entry (None) weighs as the
    lowest score given; temperature must be > 0 (lower = greedier resampling)."""
    if not scores:
        return []
    if temperature <= 0:
        raise ValueError("temperature must be > 0")
    known = [s for s in scores if s is not None]
    floor = min(known) if known else 0.0
    values = [(s if s is not None else floor) / temperature for s in scores]
    top = max(values)
    exps = [math.exp(v - top) for v in values]  # shifted by the max: no overflow
    total = sum(exps)
    return [e / total for e in exps]


def systematic_resample(weights: Sequence[float], n: int, offset: float) -> list[int]:
    """`n` indices drawn in proportion to `weights` by systematic resampling: n evenly spaced pointers
    (offset + k) / n, offset in [0, 1), each drawing the index i with C[i-1] <= pointer < C[i] (C the cumulative
    weights). Index i is drawn floor(n * w_i) or that plus one times: lower variance than n independent draws,
    and one random number per generation."""
    if n <= 0 or not weights:
        return []
    total = float(sum(weights))
    if total <= 0:
        raise ValueError("weights must have a positive sum")
    cumulative: list[float] = []
    running = 0.0
    for w in weights:
        running += w / total
        cumulative.append(running)
    last = max(i for i, w in enumerate(weights) if w > 0)
    cumulative[last:] = [1.0] * (len(cumulative) - last)  # rounding must not leave a pointer past the last weight
    below_one = math.nextafter(1.0, 0.0)
    out: list[int] = []
    i = 0
    for k in range(n):
        # (offset + k) / n rounds to exactly 1.0 for an offset just under 1 (e.g. (1 - 2**-53 + 1) / 2): clamp it
        pointer = min((offset % 1.0 + k) / n, below_one)
        while cumulative[i] <= pointer:  # the i with C[i-1] <= pointer < C[i]: a zero weight is never drawn
            i += 1
        out.append(i)
    return out


def uct_score(value_sum: float, visits: int, parent_visits: int, c_explore: float) -> float:
    """UCT (UCB1 on trees): mean value + c * sqrt(ln N_parent / n); an unvisited child is +inf (tried first)."""
    if visits <= 0:
        return math.inf
    return value_sum / visits + c_explore * math.sqrt(math.log(max(parent_visits, 1)) / visits)


def uct_pick(children: Sequence[tuple[float, int]], parent_visits: int, c_explore: float) -> int:
    """Index of the child with the highest UCT score among (value_sum, visits); ties to the lower index."""
    if not children:
        raise ValueError("no children to pick from")
    best, best_score = 0, -math.inf
    for i, (value_sum, visits) in enumerate(children):
        score = uct_score(value_sum, visits, parent_visits, c_explore)
        if score > best_score:
            best, best_score = i, score
    return best


def robust_pick(children: Sequence[tuple[float, int]]) -> int:
    """The final move of MCTS: the most visited child, ties to the higher mean value, then the lower index."""
    if not children:
        raise ValueError("no children to pick from")
    return max(range(len(children)),
               key=lambda i: (children[i][1], children[i][0] / children[i][1] if children[i][1] else -math.inf, -i))


# ------------------------------------------------------------------ AB-MCTS: Thompson sampling


BETA_PRIOR = (1.0, 1.0)
"""Beta(1, 1): uniform over [0, 1] before any score is seen."""
GAUSSIAN_PRIOR = (1.0, 1.0, 0.01)
"""Normal-inverse-gamma prior strength kappa0, shape alpha0 and scale beta0 (the prior mean is given per decision:
the mean of every score seen so far, so unbounded scores such as log-likelihoods need no fixed scale)."""


@dataclass
class ScoreSummary:
    """What the posteriors need of an option's scores, kept as they come (no list per option): their count, sum,
    squared deviations from their mean (Welford's update) and sum clamped to [0, 1] (the Beta's successes)."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    clamped: float = 0.0

    def add(self, score: float) -> None:
        before = self.mean
        self.n += 1
        self.total += score
        self.squares += (score - before) * (score - self.mean)  # a huge score gives inf, not an error
        self.clamped += min(1.0, max(0.0, score))

    @property
    def mean(self) -> float:
        return self.total / self.n if self.n else 0.0

    @classmethod
    def of(cls, scores: Scores) -> ScoreSummary:
        if isinstance(scores, ScoreSummary):
            return scores
        summary = cls()
        for score in scores:
            summary.add(score)
        return summary


Scores = Sequence[float] | ScoreSummary
"""An option's scores: as a list, or summarised as they came."""


def beta_posterior(scores: Scores, prior: tuple[float, float] = BETA_PRIOR) -> tuple[float, float]:
    """Beta(a + sum s, b + sum (1 - s)): each score in [0, 1] counts as a fractional success (scores outside are
    clamped to [0, 1])."""
    s = ScoreSummary.of(scores)
    return prior[0] + s.clamped, prior[1] + (s.n - s.clamped)


def gaussian_posterior(scores: Scores, prior_mean: float,
                       prior: tuple[float, float, float] = GAUSSIAN_PRIOR) -> tuple[float, float, float, float]:
    """(mean, kappa, alpha, beta) of the normal-inverse-gamma posterior of Gaussian scores with unknown mean and
    variance: kappa = k0 + n, mean = (k0 mu0 + n xbar) / kappa, alpha = a0 + n / 2,
    beta = b0 + SS / 2 + k0 n (xbar - mu0)^2 / (2 kappa), SS the squared deviations from xbar."""
    k0, a0, b0 = prior
    s = ScoreSummary.of(scores)
    n = s.n
    if n == 0:
        return prior_mean, k0, a0, b0
    mean = s.mean
    kappa = k0 + n
    shift = mean - prior_mean
    return ((k0 * prior_mean + n * mean) / kappa, kappa, a0 + n / 2,
            b0 + s.squares / 2 + k0 * n * shift * shift / (2 * kappa))


def thompson_draw(scores: Scores, rng: random.Random, posterior: str, prior_mean: float = 0.5) -> float:
    """One draw from the posterior of an option's scores: Beta (`posterior` "beta", scores in [0, 1]) or the
    normal-inverse-gamma's mean (variance drawn from the inverse gamma, then the mean from its normal)."""
    if posterior == "beta":
        a, b = beta_posterior(scores)
        return rng.betavariate(a, b)
    if posterior != "gaussian":
        raise ValueError(f"unknown posterior {posterior!r}: beta or gaussian")
    mean, kappa, alpha, beta = gaussian_posterior(scores, prior_mean)
    variance = beta / rng.gammavariate(alpha, 1.0)  # 1 / Gamma(alpha, rate beta) is InvGamma(alpha, beta)
    return rng.gauss(mean, math.sqrt(variance / kappa))


def thompson_pick(options: Sequence[Scores], rng: random.Random, posterior: str,
                  prior_mean: float = 0.5) -> int:
    """Thompson sampling: one draw per option (its scores so far) in order, the index of the highest draw (ties to
    the lower index). AB-MCTS's option 0 is "generate a new child" (wider), the others its existing children."""
    if not options:
        raise ValueError("no options to pick from")
    draws = [thompson_draw(scores, rng, posterior, prior_mean) for scores in options]
    draws = [d if not math.isnan(d) else -math.inf for d in draws]  # scores too large for floats draw nothing
    return max(range(len(draws)), key=lambda i: (draws[i], -i))


def posterior_for(scores: Iterable[float], choice: str) -> str:
    """The posterior family of `choice` ("auto": Beta while every score seen lies in [0, 1], else Gaussian)."""
    if choice != "auto":
        return choice
    return "beta" if all(0.0 <= s <= 1.0 for s in scores) else "gaussian"
