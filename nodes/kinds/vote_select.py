"""The voter's model-judged methods: `genselect` (the model reads the numbered candidates and names the best) and
`tournament` (pairwise knockout or league, each pair judged in both orders); every round's calls go to the engine
at once, as concurrent requests it batches.

Trace detail (the vote event's "detail"):
    genselect: {"draws", "max_candidates", "rounds": [[{"group": [indices], "winner", "fallback": bool,
                 "tied": [indices], "draws": [{"pick": index | None, "number": named number | None,
                 "reasoning"}]}]]}
    tournament: {"format", "judgements", "rounds": [{"round", "matches": [{"a", "b", "wins": [a's, b's], "winner",
                  "tied": bool, "judgements": [{"order": "ab" | "ba", "verdict": "A" | "B" | None, "pick",
                  "reasoning"}]}], "bye": index | None}], "standings" (league): [{"index", "wins", "matches_won",
                  "played"}]}
"""

from __future__ import annotations

from typing import Any

from backends.base import SamplingParams
from nodes.algorithms.selection import (
    Match,
    answer_part,
    answer_support,
    judgement_orders,
    knockout_pairs,
    league_pairs,
    league_standings,
    majority_pick,
    parse_pair_winner,
    parse_pick,
    split_groups,
    tie_key,
)
from nodes.algorithms.voting import VoteResult, build_clusters
from nodes.base import Candidate, NodeContext, NodeError, Param, render_template, template_variables
from nodes.seeds import sample_seeds

DEFAULT_GENSELECT_PROMPT = (
    "Here is a problem and {count} candidate solutions.\n\nProblem:\n{question}\n\n{candidates}\n\n"
    "Which candidate solves the problem correctly? Compare them briefly, then end with a line "
    "\"Best: N\", N the number of the best candidate.")
DEFAULT_PAIR_PROMPT = (
    "Here is a problem and two responses.\n\nProblem:\n{question}\n\nResponse A:\n{response_a}\n\n"
    "Response B:\n{response_b}\n\nWhich response solves the problem correctly? Compare them briefly, then end "
    "with a line \"Winner: A\" or \"Winner: B\".")
GENSELECT_VARS = ("question", "candidates", "count")
PAIR_VARS = ("question", "response_a", "response_b")
REASONING_CHARS = 2000
"""Each judgement's text kept in the vote event (the LM call in the trace keeps all of it)."""
TIE_RULE = "the candidate whose answer more candidates share, then the lowest index"


def select_params() -> tuple[Param, ...]:
    """The voter's params for genselect and tournament."""
    both = ("method", ("genselect", "tournament"))
    return (
        Param("prompt", "text", DEFAULT_GENSELECT_PROMPT, "GenSelect: the selection prompt; {candidates} are the "
              "numbered candidates, {count} how many, {question} the problem", show_if=("method", ("genselect",))),
        Param("draws", "int", 1, "GenSelect: selection samples per group; the most picked candidate wins", min=1,
              max=64, show_if=("method", ("genselect",))),
        Param("max_candidates", "int", 8, "GenSelect: the most candidates in one prompt; more are split into "
              "groups whose winners are compared again", min=2, max=64, show_if=("method", ("genselect",))),
        Param("pair_prompt", "text", DEFAULT_PAIR_PROMPT, "Tournament: the comparison prompt ({response_a}, "
              "{response_b}, {question})", show_if=("method", ("tournament",))),
        Param("judgements", "int", 2, "Tournament: judgements per pair, alternating the order (2: both orders, "
              "cancelling position bias)", min=1, max=16, show_if=("method", ("tournament",))),
        Param("format", "choice", "knockout", "Tournament: knockout (winners advance until one remains) or league "
              "(every pair; most judgements won)", choices=("knockout", "league"),
              show_if=("method", ("tournament",))),
        Param("temperature", "float", 0.7, "GenSelect / tournament: the judge's sampling temperature", min=0.0,
              max=2.0, show_if=both),
        Param("max_tokens", "int", 512, "GenSelect / tournament: the most tokens of each judgement", min=1,
              max=32768, show_if=both),
    )


def select_problems(params: dict[str, Any]) -> list[tuple[str, str]]:
    """The prompts' variables: the candidates must appear, and nothing else may be asked for."""
    method = params.get("method")
    checks = {"genselect": ("prompt", GENSELECT_VARS, ("candidates",)),
              "tournament": ("pair_prompt", PAIR_VARS, ("response_a", "response_b"))}
    if not isinstance(method, str) or method not in checks:
        return []  # the type check reports a method that is not text
    name, allowed, needed = checks[method]
    text = params.get(name)
    if not isinstance(text, str):
        return []  # the type check reports it
    used = template_variables(text)
    problems = [(name, f"must contain {{{v}}} (where the candidates go)") for v in needed if v not in used]
    unknown = [v for v in used if v not in allowed]
    if unknown:
        problems.append((name, f"uses unknown variable(s) {', '.join('{' + v + '}' for v in unknown)}; it may use "
                               f"{', '.join('{' + v + '}' for v in allowed)} (write {{{{ and }}}} for braces)"))
    return problems


def _chat(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def _sampling(params: dict[str, Any]) -> SamplingParams:
    return SamplingParams(max_tokens=int(params["max_tokens"]), temperature=float(params["temperature"]))


def _clusters_result(method: str, answers: list[str | None], winner: int | None, ties: list[int],
                     detail: dict[str, Any]) -> VoteResult:
    clusters = build_clusters(answers)
    clusters.sort(key=lambda c: -c.count)
    return VoteResult(method, answers[winner] if winner is not None else None, winner, clusters,
                      [i for i, a in enumerate(answers) if a is None], [str(i) for i in ties],
                      TIE_RULE, True, detail)


def genselect_vote(cands: list[Candidate], answers: list[str | None], question: str, params: dict[str, Any],
                   ctx: NodeContext) -> VoteResult:
    """GenSelect (Toshniwal et al. 2025): each group of at most max_candidates is shown numbered, `draws`
    judgements name the best, the most named wins; group winners meet again until one group remains."""
    support = answer_support(answers)
    entrants = list(range(len(cands)))
    draws, limit = int(params["draws"]), int(params["max_candidates"])
    sp = _sampling(params)
    rounds: list[list[dict[str, Any]]] = []
    last_ties: list[int] = []
    while len(entrants) > 1:
        groups = split_groups(entrants, limit)
        r = len(rounds)

        def judge(job: tuple[int, list[int]], r: int = r) -> dict[str, Any]:
            g, group = job
            if len(group) == 1:  # alone in its group: it goes through without a call
                return {"group": group, "winner": group[0], "fallback": False, "tied": [], "draws": []}
            listed = "\n\n".join(f"Candidate {k + 1}:\n{cands[i].text.strip()}" for k, i in enumerate(group))
            text = render_template(str(params["prompt"]), {"question": question, "candidates": listed,
                                                           "count": str(len(group))})
            result = ctx.generate(_chat(text), sp, n=draws, seeds=sample_seeds(ctx.seed, draws, "genselect", r, g),
                                  purpose="select", tag={"genselect_round": r, "group": g})
            out = []
            for c in result.completions:
                pos = parse_pick(c.text, len(group))
                out.append({"pick": group[pos] if pos is not None else None,
                            "number": pos + 1 if pos is not None else None,
                            "reasoning": answer_part(c.text).strip()[:REASONING_CHARS]})
            winner, tied = majority_pick([d["pick"] for d in out], support)
            fallback = winner is None
            if fallback:  # no judgement named a candidate: the tie rule decides
                winner = min(group, key=lambda i: tie_key(i, support))
            return {"group": group, "winner": winner, "fallback": fallback, "tied": tied, "draws": out}

        results = ctx.map(judge, list(enumerate(groups)))
        rounds.append(results)
        ctx.progress(len(rounds), len(rounds) + (len(results) > 1))
        entrants = [res["winner"] for res in results]
        last_ties = results[-1]["tied"] if len(results) == 1 else []
    winner = entrants[0] if entrants else None
    return _clusters_result("genselect", answers, winner, last_ties,
                            {"draws": draws, "max_candidates": limit, "rounds": rounds})


def tournament_vote(cands: list[Candidate], answers: list[str | None], question: str, params: dict[str, Any],
                    ctx: NodeContext) -> VoteResult:
    """Pairwise tournament (Liu et al. 2024): each pair judged `judgements` times in alternating orders; knockout
    advances each match's winner (a bye for an odd one out) until one remains, league plays every pair once
    and ranks by judgements won. Every round's judgements are sent at once."""
    tournament = _Tournament(cands, answer_support(answers), question, params, ctx)
    entrants = list(range(len(cands)))
    if params["format"] == "league" and len(entrants) > 1:
        entrants, ties = tournament.play_league(entrants)
    else:
        entrants, ties = tournament.play_knockout(entrants)
    winner = entrants[0] if entrants else None
    return _clusters_result("tournament", answers, winner, ties if len(ties) > 1 else [], tournament.detail())


class _Tournament:
    """One tournament's state and phases: judging a pair, playing a round, the league, the knockout, the trace."""

    def __init__(self, cands: list[Candidate], support: list[int], question: str, params: dict[str, Any],
                 ctx: NodeContext) -> None:
        self.cands = cands
        self.support = support
        self.question = question
        self.params = params
        self.ctx = ctx
        self.orders = judgement_orders(int(params["judgements"]))
        self.sp = _sampling(params)
        self.rounds: list[dict[str, Any]] = []
        self.standings: list[dict[str, Any]] | None = None

    def judge(self, job: tuple[int, int, int, int, bool], r: int) -> dict[str, Any]:
        """One judgement of match m in round r, the pair shown in the job's order."""
        m, j, a, b, swapped = job
        first, second = (b, a) if swapped else (a, b)
        text = render_template(str(self.params["pair_prompt"]), {
            "question": self.question, "response_a": self.cands[first].text.strip(),
            "response_b": self.cands[second].text.strip()})
        result = self.ctx.generate(_chat(text), self.sp, n=1,
                                   seeds=sample_seeds(self.ctx.seed, 1, "tournament", r, m, j),
                                   purpose="select", tag={"tournament_round": r, "match": m, "judgement": j})
        reply = result.completions[0].text
        verdict = parse_pair_winner(reply)
        pick = None if verdict is None else (first if verdict == "A" else second)
        return {"order": "ba" if swapped else "ab", "verdict": verdict, "pick": pick,
                "reasoning": answer_part(reply).strip()[:REASONING_CHARS]}

    def play(self, pairs: list[tuple[int, int]], r: int) -> list[dict[str, Any]]:
        """Every judgement of every pair of round r, sent at once; one match record per pair."""
        jobs = [(m, j, a, b, swapped) for m, (a, b) in enumerate(pairs) for j, swapped in enumerate(self.orders)]
        done = self.ctx.map(lambda job: self.judge(job, r), jobs)
        matches = []
        for m, (a, b) in enumerate(pairs):
            mine = [d for job, d in zip(jobs, done, strict=True) if job[0] == m]
            match = Match(a, b, [d["pick"] for d in mine])
            matches.append({"a": a, "b": b, "wins": list(match.wins), "winner": match.winner(self.support),
                            "tied": match.tied(), "judgements": mine, "_match": match})
        return matches

    def play_league(self, entrants: list[int]) -> tuple[list[int], list[int]]:
        """Every pair once, ranked by judgements won: the leader, and everyone level with it."""
        matches = self.play(league_pairs(entrants), 0)
        self.standings = league_standings(entrants, [m["_match"] for m in matches], self.support)
        self.rounds.append({"round": 0, "matches": matches, "bye": None})
        top = self.standings[0]
        level = (top["wins"], top["matches_won"])
        return [top["index"]], [s["index"] for s in self.standings if (s["wins"], s["matches_won"]) == level]

    def play_knockout(self, entrants: list[int]) -> tuple[list[int], list[int]]:
        """Rounds of pairs (a bye for an odd one out) until one remains: it, and the final's pair if tied."""
        ties: list[int] = []
        total = max(1, (len(entrants) - 1).bit_length())
        while len(entrants) > 1:
            pairs, bye = knockout_pairs(entrants)
            matches = self.play(pairs, len(self.rounds))
            self.rounds.append({"round": len(self.rounds), "matches": matches, "bye": bye})
            self.ctx.progress(len(self.rounds), total)
            entrants = [m["winner"] for m in matches] + ([bye] if bye is not None else [])
            if len(entrants) == 1 and matches[-1]["tied"]:
                ties = [matches[-1]["a"], matches[-1]["b"]]
        return entrants, ties

    def detail(self) -> dict[str, Any]:
        """The vote event's detail: the rounds without their working Match objects, and the league table."""
        for rnd in self.rounds:
            for m in rnd["matches"]:
                m.pop("_match", None)
        detail: dict[str, Any] = {"format": self.params["format"], "judgements": len(self.orders),
                                  "rounds": self.rounds}
        if self.standings is not None:
            detail["standings"] = self.standings
        return detail


def question_of(inputs: dict[str, Any], prompt: str) -> str:
    """The problem shown to the judge: the wired `question`, else the prompt the candidates answered."""
    question = inputs.get("question")
    if question is not None and str(question).strip():
        return str(question).strip()
    if prompt.strip():
        return prompt.strip()
    raise NodeError("genselect / tournament voting needs the problem the candidates answer: wire the voter's "
                    "`question` input (the candidates carry no prompt)")
