"""The voter's genselect and tournament methods and the self_certainty verifier through the scheduler on the
scripted fake backend: a judge that recognises the right answer, one with a position bias, and the validation."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.scheduler import FAILED, SUCCEEDED, RunResult, Scheduler
from app.traces.store import TraceStore
from app.viz.samples import samples_html
from app.viz.selection import selection_body
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from backends.base import SamplingParams, TokenLogprob
from backends.fake import FakeBackend
from nodes.registry import default_registry

REGISTRY = default_registry()
QUESTION = "What is 3 + 4?"
WRONG_MAJORITY = ["3 + 4 = 8", "3 + 4 = 8", "3 + 4 = 7", "3 + 4 = 8", "3 + 4 = 9"]
"""Five samples (by seed modulo 5): a plain majority says 8; the judge below knows 7 is right."""


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def smart_judge(prompt: str, seed: int, samples: list[str] = WRONG_MAJORITY) -> str:
    """Samples from `samples` (by seed); as a judge, names the candidate that says 7 (else the first shown)."""
    if "Response A:" in prompt:
        a = _between(prompt, "Response A:\n", "\n\nResponse B:")
        b = _between(prompt, "Response B:\n", "\n\nWhich")
        winner = "B" if "= 7" in b and "= 7" not in a else "A"
        return f"Response A says {a[-1]}, response B says {b[-1]}.\nWinner: {winner}"
    if "candidate solutions" in prompt:
        shown = re.findall(r"Candidate (\d+):\n([^\n]*)", prompt)
        best = next((k for k, text in shown if "= 7" in text), shown[0][0])
        return f"Only one adds up.\nBest: {best}"
    return samples[seed % len(samples)]


def biased_judge(prompt: str, seed: int) -> str:
    """Always prefers whatever is shown first."""
    if "Response A:" in prompt:
        return "Winner: A"
    return WRONG_MAJORITY[seed % len(WRONG_MAJORITY)]


def make(vote: dict[str, Any], n: int = 5) -> Any:
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": QUESTION}},
        "nodes": [{"id": "s", "kind": "sampler", "params": {"n": n, "prompt": "{question}", "extract": "last_number",
                                                             "temperature": 0.8},
                   "inputs": {"question": "inputs.question"}},
                  {"id": "v", "kind": "voter", "params": {"extract": "last_number", **vote},
                   "inputs": {"candidates": "s.candidates", "question": "inputs.question"}}],
        "outputs": {"answer": "v.answer", "best": "v.best", "result": "v.result"}})


def run(wf: Any, backend: FakeBackend, store: TraceStore | None = None) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    observers: list[Any] = [rec] + ([store] if store is not None else [])
    result = Scheduler(REGISTRY, lambda spec: backend).run(wf, seed=0, observers=observers)
    return result, rec


def judge_calls(rec: EventRecorder) -> list[dict[str, Any]]:
    return [e.data for e in rec.of_type("lm_call") if e.node_id == "v"]


def traced(wf: Any, backend: FakeBackend, tmp_path: Path) -> tuple[RunResult, EventRecorder, dict[str, Any]]:
    """A run with the trace store as observer, and its record as the Traces tab reads it."""
    store = TraceStore(tmp_path / "traces.db")
    try:
        result, rec = run(wf, backend, store)
        assert store.flush()
        return result, rec, store.get_run(result.run_id)
    finally:
        store.close()


def test_genselect_picks_the_candidate_the_judge_names_over_the_majority(tmp_path: Path) -> None:
    result, rec, record = traced(make({"method": "genselect", "draws": 3}), FakeBackend(reply_fn=smart_judge),
                                 tmp_path)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["answer"] == "7" and result.outputs["best"] == "3 + 4 = 7"
    cands = result.node_outputs["s"]["candidates"].candidates
    detail = result.outputs["result"]["detail"]
    (group,) = detail["rounds"][0]
    assert group["group"] == [0, 1, 2, 3, 4] and not group["fallback"]
    assert [d["pick"] for d in group["draws"]] == [group["winner"]] * 3
    assert cands[group["winner"]].text == "3 + 4 = 7" and "Only one adds up" in group["draws"][0]["reasoning"]
    calls = judge_calls(rec)
    assert len(calls) == 3 and {c["purpose"] for c in calls} == {"select"}  # one request of n = 3 draws
    assert all(f"Candidate {k}:" in calls[0]["prompt"] for k in range(1, 6)) and QUESTION in calls[0]["prompt"]
    html = selection_body(record)
    assert "GenSelect at v" in html and html.count("draw ") == 3 and "Only one adds up" in html
    majority, _ = run(make({"method": "majority"}), FakeBackend(reply_fn=smart_judge))
    assert majority.outputs["answer"] == "8"


def test_genselect_splits_large_sets_into_groups_and_compares_the_winners() -> None:
    result, rec = run(make({"method": "genselect", "max_candidates": 2}), FakeBackend(reply_fn=smart_judge))
    assert result.status == SUCCEEDED, result.error
    rounds = result.outputs["result"]["detail"]["rounds"]
    assert [g["group"] for g in rounds[0]] == [[0, 1], [2, 3], [4]]
    assert len(rounds) == 3 and len(rounds[-1]) == 1  # 5 -> 3 winners -> 2 -> 1
    assert rounds[0][2]["draws"] == []  # alone in its group: no call
    assert result.outputs["answer"] == "7"
    assert len(judge_calls(rec)) == 2 + 1 + 1


def test_genselect_without_a_readable_pick_falls_back_to_the_tie_rule() -> None:
    backend = FakeBackend(reply_fn=lambda p, s: "I cannot decide." if "candidate solutions" in p
                          else WRONG_MAJORITY[s % 5])
    result, _ = run(make({"method": "genselect"}), backend)
    assert result.status == SUCCEEDED, result.error
    (group,) = result.outputs["result"]["detail"]["rounds"][0]
    assert group["fallback"] and group["draws"][0]["pick"] is None
    assert result.outputs["answer"] == "8"  # the most shared answer, then the lowest index


def test_knockout_tournament_advances_winners_and_sends_each_round_at_once(tmp_path: Path) -> None:
    backend = FakeBackend(reply_fn=smart_judge, latency_s=0.05)
    result, rec, record = traced(make({"method": "tournament"}), backend, tmp_path)
    assert result.status == SUCCEEDED, result.error
    assert result.outputs["answer"] == "7"
    detail = result.outputs["result"]["detail"]
    assert detail["format"] == "knockout" and detail["judgements"] == 2
    first = detail["rounds"][0]
    assert [(m["a"], m["b"]) for m in first["matches"]] == [(0, 1), (2, 3)] and first["bye"] == 4
    assert [j["order"] for j in first["matches"][0]["judgements"]] == ["ab", "ba"]
    assert sum(len(m["judgements"]) for r in detail["rounds"] for m in r["matches"]) == 2 * 4  # 4 matches
    assert len(judge_calls(rec)) == 8
    # the four judgements of round 1 were in flight together (concurrent requests the engine can batch)
    judged = [c for c in backend.calls if "Response A:" in c["prompt"]]
    round_one = judged[:4]
    assert max(c["start"] for c in round_one) < min(c["end"] for c in round_one)
    html = samples_html(record)  # the Traces tab's samples view of the voter draws the bracket
    assert "Tournament at v" in html and "Round 1" in html and "Round 3" in html and "(bye)" in html
    assert html.count("judgements won") == 4 and "Winner: B" in html  # four matches, their reasoning folded


def test_league_plays_every_pair_and_ranks_by_judgements_won(tmp_path: Path) -> None:
    four = ["3 + 4 = 8", "3 + 4 = 7", "3 + 4 = 9", "3 + 4 = 8"]
    backend = FakeBackend(reply_fn=lambda p, s: smart_judge(p, s, four))
    result, rec, record = traced(make({"method": "tournament", "format": "league"}, n=4), backend, tmp_path)
    assert result.status == SUCCEEDED, result.error
    detail = result.outputs["result"]["detail"]
    assert len(detail["rounds"]) == 1 and len(detail["rounds"][0]["matches"]) == 6
    assert len(judge_calls(rec)) == 12
    standings = detail["standings"]
    cands = result.node_outputs["s"]["candidates"].candidates
    assert cands[standings[0]["index"]].text == "3 + 4 = 7" and standings[0]["wins"] == 6
    assert result.outputs["answer"] == "7"
    assert "League: every pair" in selection_body(record) and "<table class=mg-league>" in selection_body(record)


def test_both_orders_cancel_a_position_bias() -> None:
    result, _ = run(make({"method": "tournament"}, n=4), FakeBackend(reply_fn=biased_judge))
    assert result.status == SUCCEEDED, result.error
    matches = [m for r in result.outputs["result"]["detail"]["rounds"] for m in r["matches"]]
    assert all(m["wins"] == [1, 1] and m["tied"] for m in matches)
    # every match tied: the candidate whose answer more samples share, then the lower index
    assert result.outputs["answer"] == "8"
    one_order, _ = run(make({"method": "tournament", "judgements": 1}, n=4), FakeBackend(reply_fn=biased_judge))
    first = one_order.outputs["result"]["detail"]["rounds"][0]["matches"]
    assert all(m["wins"] == [1, 0] for m in first)  # one order: the bias decides every match


@pytest.mark.parametrize(("params", "words"), [
    ({"method": "tournament", "judgements": 0}, "'judgements' must be >= 1"),
    ({"method": "genselect", "draws": 0}, "'draws' must be >= 1"),
    ({"method": "genselect", "max_candidates": 1}, "'max_candidates' must be >= 2"),
    ({"method": "tournament", "format": "swiss"}, "must be one of knockout, league"),
    ({"method": "genselect", "prompt": "Pick one of them."}, "must contain {candidates}"),
    ({"method": "genselect", "prompt": "{candidates} for {topic}"}, "unknown variable(s) {topic}"),
    ({"method": "tournament", "pair_prompt": "{response_a} or not?"}, "must contain {response_b}"),
    ({"method": "weighted", "power": -1}, "'power' must be >= 0"),
])
def test_bad_params_are_reported_as_bad_param(params: dict[str, Any], words: str) -> None:
    problems = validate(make(params), REGISTRY)
    assert [p.code for p in problems] == ["bad_param"], problems
    assert words in problems[0].message, problems[0].message


def _bon(verifier: dict[str, Any], vote: dict[str, Any], sampler: dict[str, Any] | None = None) -> Any:
    return workflow_from_dict({
        "version": 1, "name": "t", "inputs": {"question": {"type": "text", "default": QUESTION}},
        "nodes": [{"id": "s", "kind": "sampler", "params": {"n": 4, "prompt": "{question}", "extract": "last_number",
                                                             **(sampler or {})},
                   "inputs": {"question": "inputs.question"}},
                  {"id": "c", "kind": "verifier", "params": verifier, "inputs": {"candidates": "s.candidates"}},
                  {"id": "v", "kind": "voter", "params": {"extract": "last_number", **vote},
                   "inputs": {"candidates": "c.candidates"}}],
        "outputs": {"answer": "v.answer", "scores": "c.scores", "result": "v.result"}})


CONF = {"sure": 5.0, "unsure": 1.0, "so": 2.0, "7": 4.0, "8": 1.0}


def test_self_certainty_scores_the_mean_of_the_recorded_statistic_and_best_of_n_picks_the_top() -> None:
    replies = ["unsure so 8", "sure so 7", "unsure so 8", "unsure unsure 8"]
    backend = FakeBackend(replies=replies, token_confidence=CONF)
    result, rec = run(_bon({"method": "self_certainty"}, {"method": "best_of_n"}), backend)
    assert result.status == SUCCEEDED, result.error
    # the fake's self-certainty is twice each word's confidence: means 2(1+2+1)/3, 2(5+2+4)/3, ..., 2(1+1+1)/3
    assert result.outputs["scores"] == pytest.approx([8 / 3, 22 / 3, 8 / 3, 2.0])
    assert result.outputs["answer"] == "7"
    assert not [e for e in rec.of_type("lm_call") if e.node_id == "c"], "self-certainty makes no model call"
    # Borda with power 0 is a majority (8); a large power follows the most certain candidate (7)
    flat, _ = run(_bon({"method": "self_certainty"}, {"method": "weighted", "power": 0}),
                  FakeBackend(replies=replies, token_confidence=CONF))
    steep, _ = run(_bon({"method": "self_certainty"}, {"method": "weighted", "power": 3}),
                   FakeBackend(replies=replies, token_confidence=CONF))
    assert flat.outputs["answer"] == "8" and steep.outputs["answer"] == "7"  # 4^3 = 64 against 3^3 + 3^3 + 1
    assert steep.outputs["result"]["detail"]["weighting"] == "borda"


def test_self_certainty_refuses_candidates_without_the_statistic() -> None:
    wf = workflow_from_dict({
        "version": 1, "name": "t", "nodes": [
            {"id": "g", "kind": "generator", "params": {"prompt": "Hi"}},
            {"id": "c", "kind": "verifier", "params": {"method": "self_certainty"},
             "inputs": {"candidates": "g.candidates"}}],
        "outputs": {"scores": "c.scores"}})
    result, _ = run(wf, FakeBackend())
    assert result.status == FAILED and "token statistics" in (result.error or "")


def test_self_certainty_approximated_on_a_remote_engine_warns() -> None:
    """A remote engine's statistics come from top logprobs, marked approximate: the verifier scores and warns."""

    class TopLogprobsBackend(FakeBackend):
        def generate(self, prompt: Any, params: SamplingParams, n: int = 1, seeds: Any = None, on_token: Any = None,
                     cancel: Any = None) -> Any:
            from backends.token_stats import approx_token_stats
            result = super().generate(prompt, params, n, seeds, on_token, cancel)
            for c in result.completions:
                tops = [TokenLogprob(w, -0.1 * k, [(w, -0.1 * k), ("x", -3.0)]) for k, w in enumerate(c.text.split())]
                c.token_stats = approx_token_stats(tops)
            return result

    result, rec = run(_bon({"method": "self_certainty"}, {"method": "best_of_n"}),
                      TopLogprobsBackend(replies=["a 7", "b c 8"]))
    assert result.status == SUCCEEDED, result.error
    notes = [e.data for e in rec.of_type("node_event") if e.data["kind"] == "note" and e.node_id == "c"]
    assert notes and "approximated from the top logprobs" in notes[0]["message"]
    cands = result.node_outputs["c"]["candidates"].candidates
    assert all("approximated" in c.meta["reasons"]["c"] for c in cands)
