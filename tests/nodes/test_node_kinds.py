"""Every node kind through the scheduler on the scripted fake backend."""

from __future__ import annotations

import itertools
import json
import math
from typing import Any

import pytest

from app.run.events import EventRecorder
from app.run.providers import fake_provider
from app.run.scheduler import FAILED, SUCCEEDED, RunResult, Scheduler
from app.workflow.problems import WorkflowError
from app.workflow.spec import workflow_from_dict
from app.workflow.validation import validate
from nodes.base import CandidateSet
from nodes.registry import default_registry

REGISTRY = default_registry()
KINDS = ("input", "output", "template", "generator", "sampler", "verifier", "voter", "refiner", "search")


def make(nodes: list[dict[str, Any]], outputs: dict[str, str], inputs: dict[str, Any] | None = None):
    data = {"version": 1, "name": "t", "inputs": inputs or {"question": {"type": "text", "default": "What is 3 + 4?"}},
            "nodes": nodes, "outputs": outputs}
    return workflow_from_dict(data)


def run(wf, seed: int = 0, allow_python: bool = True, **fake: Any) -> tuple[RunResult, EventRecorder]:
    rec = EventRecorder(skip=("token",))
    scheduler = Scheduler(REGISTRY, fake_provider(**fake), allow_python=allow_python)
    return scheduler.run(wf, seed=seed, observers=[rec]), rec


def node_events(rec: EventRecorder, kind: str) -> list[dict[str, Any]]:
    return [e.data for e in rec.of_type("node_event") if e.data["kind"] == kind]


def sampler(n: int = 4, **params: Any) -> dict[str, Any]:
    return {"id": "s", "kind": "sampler", "params": {"n": n, "prompt": "{question}", **params},
            "inputs": {"question": "inputs.question"}}


# ------------------------------------------------------------------ schema


def test_every_kind_is_registered_with_a_complete_schema() -> None:
    assert set(KINDS) <= set(REGISTRY.kinds())
    for kind in KINDS:
        schema = REGISTRY.get(kind).schema()
        json.dumps(schema)
        assert schema["description"] and schema["title"]
        for p in schema["params"]:
            assert p["description"], f"{kind}.{p['name']} has no description"
            if p["type"] == "choice":
                assert p["default"] in p["choices"], f"{kind}.{p['name']} default not a choice"
            if p["show_if"]:
                assert REGISTRY.get(kind).param(p["show_if"]["param"]) is not None


def test_io_kinds_belong_to_their_sections() -> None:
    assert REGISTRY.get("input").section == "inputs"
    assert REGISTRY.get("output").section == "outputs"
    wf = make([{"id": "x", "kind": "input"}], {"a": "inputs.question"})
    assert "io_in_nodes" in [i.code for i in validate(wf, REGISTRY)]


def test_input_and_output_pass_values_through() -> None:
    from nodes.kinds.io import InputNode, OutputNode

    assert InputNode().run({}, {"default": 3}, None)["value"] == 3  # type: ignore[arg-type]
    assert OutputNode().run({"value": [1]}, {"name": "a"}, None)["value"] == [1]  # type: ignore[arg-type]


def test_template_variables_become_required_inputs_but_reserved_ones_do_not() -> None:
    wf = make([{"id": "t", "kind": "template", "params": {"template": "{a} and {b}"},
                "inputs": {"a": "inputs.question"}}], {"out": "t.text"})
    issues = validate(wf, REGISTRY)
    assert [(i.code, i.node_id) for i in issues] == [("missing_input", "t")]
    judge = make([sampler(), {"id": "v", "kind": "verifier", "inputs": {"candidates": "s.candidates"}}],
                 {"out": "v.scores"})
    # the default judge prompt uses {question} (must be wired) and {candidate} (filled per candidate)
    assert [i.message for i in validate(judge, REGISTRY)] == ["input 'question' is not connected"]


# ------------------------------------------------------------------ template, generator, sampler


def test_template_renders_candidate_sets_as_a_numbered_list() -> None:
    wf = make([sampler(3), {"id": "t", "kind": "template", "params": {"template": "Drafts:\n{d}"},
                            "inputs": {"d": "s.candidates"}}], {"text": "t.text"})
    result, _ = run(wf, replies=["alpha", "beta", "gamma"])
    assert result.outputs["text"] == "Drafts:\n[1] alpha\n\n[2] beta\n\n[3] gamma"


def test_generator_chat_and_raw_prompts() -> None:
    chat = make([{"id": "g", "kind": "generator", "params": {"prompt": "Q: {question}", "system": "Be brief."},
                  "inputs": {"question": "inputs.question"}}], {"text": "g.text", "c": "g.candidates"})
    result, rec = run(chat, reply_fn=lambda prompt, seed: f"  seen {prompt}  ")
    assert "<|system|>\nBe brief." in result.outputs["text"] and "<|user|>\nQ: What is 3 + 4?" in result.outputs["text"]
    assert result.outputs["text"] == result.outputs["text"].strip()
    assert len(result.outputs["c"]) == 1
    call = rec.of_type("lm_call")[0].data
    assert call["purpose"] == "generate" and call["seed"] == result.outputs["c"].candidates[0].seed
    raw = make([{"id": "g", "kind": "generator", "params": {"prompt": "Q: {question}", "mode": "raw"},
                 "inputs": {"question": "inputs.question"}}], {"text": "g.text"})
    result, _ = run(raw, reply_fn=lambda prompt, seed: prompt)
    assert result.outputs["text"] == "Q: What is 3 + 4?"


def test_generator_stop_strings_max_tokens_and_logprobs() -> None:
    wf = make([{"id": "g", "kind": "generator",
                "params": {"prompt": "{question}", "stop": ["END"], "max_tokens": 3, "logprobs": True},
                "inputs": {"question": "inputs.question"}}], {"c": "g.candidates"})
    result, _ = run(wf, replies=["one two END three"])
    cand = result.outputs["c"].candidates[0]
    assert cand.text == "one two" and cand.finish_reason == "stop"
    assert [lp["token"] for lp in cand.logprobs] == ["one", "two"]
    result, _ = run(wf, replies=["a b c d e"])
    assert result.outputs["c"].candidates[0].finish_reason == "length"


def test_bad_decoding_params_are_reported_by_validation() -> None:
    wf = make([{"id": "g", "kind": "generator", "params": {"prompt": "{question}", "grammar": "root ::= \"a\"",
                                                          "json_schema": "{not json", "temperature": -1},
                "inputs": {"question": "inputs.question"}}], {"t": "g.text"})
    codes = [(i.code, i.message) for i in validate(wf, REGISTRY)]
    assert len(codes) == 3 and all(c == "bad_param" for c, _ in codes)


def test_sampler_seeds_are_distinct_and_reproducible() -> None:
    wf = make([sampler(5)], {"c": "s.candidates"})
    first, _ = run(wf, seed=1)
    again, _ = run(wf, seed=1)
    other, _ = run(wf, seed=2)
    seeds = [c.seed for c in first.outputs["c"].candidates]
    assert len(set(seeds)) == 5 and seeds == list(range(seeds[0], seeds[0] + 5))
    assert first.outputs["c"].texts() == again.outputs["c"].texts()
    assert seeds != [c.seed for c in other.outputs["c"].candidates]
    assert [c.index for c in first.outputs["c"].candidates] == [0, 1, 2, 3, 4]


def test_sampler_extracts_answers() -> None:
    wf = make([sampler(3, extract="last_number")], {"c": "s.candidates"})
    result, _ = run(wf, replies=["it is 1,000", "no idea", "1e3"])
    assert [c.answer for c in result.outputs["c"].candidates] == ["1000", None, "1000"]


def test_adaptive_stop_saves_samples_when_the_vote_is_decided() -> None:
    wf = make([sampler(8, adaptive="majority", batch_size=2, min_samples=3, extract="last_number")],
              {"c": "s.candidates"})
    result, rec = run(wf, replies=["7"])
    (event,) = node_events(rec, "adaptive_stop")
    # after 3: 3 > 5 no; after 5: 5 > 3 yes -> stop, 3 saved
    assert (event["drawn"], event["saved"], event["batches"]) == (5, 3, [3, 2])
    assert len(result.outputs["c"]) == 5
    assert len(rec.of_type("lm_call")) == 5


def test_adaptive_stop_draws_everything_when_the_vote_is_close() -> None:
    wf = make([sampler(6, adaptive="majority", batch_size=2, min_samples=2, extract="last_number")],
              {"c": "s.candidates"})
    result, rec = run(wf, replies=["1", "2"])
    (event,) = node_events(rec, "adaptive_stop")
    assert (event["drawn"], event["saved"]) == (6, 0)
    assert len(result.outputs["c"]) == 6


# ------------------------------------------------------------------ verifier


def verifier(method: str, **params: Any) -> dict[str, Any]:
    inputs = {"candidates": "s.candidates", "reference": "inputs.reference"}
    return {"id": "v", "kind": "verifier", "params": {"method": method, **params}, "inputs": inputs}


REF_INPUTS = {"question": {"type": "text", "default": "What is 3 + 4?"}, "reference": {"type": "text", "default": "7"}}


@pytest.mark.parametrize(("method", "params", "expected"), [
    ("exact", {"extract": "last_number"}, [1.0, 0.0, 0.0, 1.0]),
    ("contains", {}, [1.0, 0.0, 0.0, 1.0]),
    ("regex", {"regex": r"^\d+$"}, [0.0, 0.0, 0.0, 1.0]),
    ("regex", {}, [1.0, 0.0, 0.0, 1.0]),
    ("length", {"length_unit": "words"}, [3.0, 3.0, 2.0, 1.0]),
    ("length", {"length_unit": "chars", "length_target": 10}, [0.7, 0.7, 0.7, 0.1]),  # 1 - |7 - 10| / 10
])
def test_reference_and_length_methods(method: str, params: dict[str, Any], expected: list[float]) -> None:
    wf = make([sampler(4), verifier(method, **params)], {"scores": "v.scores", "c": "v.candidates"}, REF_INPUTS)
    result, rec = run(wf, replies=["it is 7", "it is 8", "no idea", "7"])
    assert result.outputs["scores"] == pytest.approx(expected)
    (event,) = node_events(rec, "score")
    assert [s["score"] for s in event["scores"]] == pytest.approx(expected)
    assert all(s["reason"] for s in event["scores"])
    cands = result.outputs["c"].candidates
    assert [c.scores["v"] for c in cands] == pytest.approx(expected)
    assert all("v" in c.meta["reasons"] for c in cands)


def test_exact_reports_no_answer_and_mismatch_reasons() -> None:
    wf = make([sampler(2), verifier("exact", extract="last_number")], {"c": "v.candidates"}, REF_INPUTS)
    result, _ = run(wf, replies=["8", "none"])
    reasons = [c.meta["reasons"]["v"] for c in result.outputs["c"].candidates]
    assert "does not match the reference '7'" in reasons[0]
    assert "no answer found" in reasons[1]


def test_llm_judge_score_is_p_yes_over_p_yes_plus_no() -> None:
    wf = make([sampler(3), {"id": "v", "kind": "verifier",
                             "inputs": {"candidates": "s.candidates", "question": "inputs.question"}}],
              {"scores": "v.scores"})
    result, rec = run(wf, choice_scores={"Yes": math.log(0.6), "No": math.log(0.2)})
    assert result.outputs["scores"] == pytest.approx([0.75, 0.75, 0.75])
    judge_calls = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "judge"]
    assert len(judge_calls) == 3
    assert all("Proposed answer:" in c["prompt"] and "What is 3 + 4?" in c["prompt"] for c in judge_calls)


def test_likelihood_scores_are_probabilities_of_the_candidate_after_the_prompt() -> None:
    wf = make([sampler(3), verifier("likelihood")], {"scores": "v.scores"}, REF_INPUTS)
    result, rec = run(wf)
    assert all(0.0 < s <= 1.0 for s in result.outputs["scores"])
    score_calls = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "score"]
    assert len(score_calls) == 3 and score_calls[0]["prompt"] == "<|user|>\nWhat is 3 + 4?\n<|assistant|>\n"
    raw, _ = run(make([sampler(3), verifier("likelihood", as_probability=False, aggregate="sum")],
                      {"scores": "v.scores"}, REF_INPUTS))
    assert all(s < 0 for s in raw.outputs["scores"])


def test_combine_merges_earlier_scores() -> None:
    nodes = [sampler(2), {**verifier("contains"), "id": "has"},
             {"id": "len", "kind": "verifier", "params": {"method": "length", "length_unit": "words"},
              "inputs": {"candidates": "has.candidates"}}]
    for op, expected in [("weighted_sum", [0.5 * 1 + 0.1 * 3, 0.5 * 0 + 0.1 * 3]), ("min", [1.0, 0.0]),
                         ("product", [3.0, 0.0]), ("mean", [2.0, 1.5])]:
        weights = {"has": 0.5, "len": 0.1} if op == "weighted_sum" else {}
        comb = {"id": "c", "kind": "verifier", "params": {"method": "combine", "combine": op, "weights": weights},
                "inputs": {"candidates": "len.candidates"}}
        result, _ = run(make([*nodes, comb], {"scores": "c.scores"}, REF_INPUTS), replies=["is 7 ok", "is 8 ok"])
        assert result.outputs["scores"] == pytest.approx(expected), op
    bad = {"id": "c", "kind": "verifier", "params": {"method": "combine", "weights": {"nope": 1}},
           "inputs": {"candidates": "len.candidates"}}
    result, _ = run(make([*nodes, bad], {"scores": "c.scores"}, REF_INPUTS))
    assert result.status == FAILED and "nope" in result.error


def test_python_verifier_failures_are_scores_and_the_run_goes_on() -> None:
    code = ("def verify(candidate, inputs):\n"
            "    if candidate == 'loop':\n        while True: pass\n"
            "    if candidate == 'net':\n        import socket; socket.socket()\n"
            "    if candidate == 'hog':\n        x = bytearray(2 * 1024 ** 3)\n"
            "    if candidate == 'boom':\n        raise RuntimeError('boom')\n"
            "    return candidate == inputs['reference']\n")
    wf = make([sampler(5), verifier("python", code=code, timeout_s=1.0, memory_mb=128),
               {"id": "vote", "kind": "voter", "params": {"method": "best_of_n", "extract": "full_text"},
                "inputs": {"candidates": "v.candidates"}}],
              {"scores": "v.scores", "c": "v.candidates", "answer": "vote.answer"}, REF_INPUTS)
    result, _ = run(wf, replies=["loop", "net", "hog", "boom", "7"])
    assert result.status == SUCCEEDED
    assert result.outputs["scores"] == [0.0, 0.0, 0.0, 0.0, 1.0]
    assert result.outputs["answer"] == "7"
    reasons = [c.meta["reasons"]["v"] for c in result.outputs["c"].candidates]
    assert "timed out" in reasons[0]
    assert "blocked" in reasons[1]
    assert "memory limit" in reasons[2]
    assert "RuntimeError: boom" in reasons[3]
    assert [c.meta["passed"]["v"] for c in result.outputs["c"].candidates] == [False] * 4 + [True]


def test_python_verifier_respects_the_share_mode_switch() -> None:
    wf = make([sampler(1), verifier("python", code="True")], {"scores": "v.scores"}, REF_INPUTS)
    result, _ = run(wf, allow_python=False)
    assert result.status == FAILED and "disabled" in result.error


def test_reference_methods_require_the_reference_input() -> None:
    wf = make([sampler(2), {"id": "v", "kind": "verifier", "params": {"method": "exact"},
                             "inputs": {"candidates": "s.candidates"}}], {"s": "v.scores"})
    assert [i.code for i in validate(wf, REGISTRY)] == ["missing_input"]
    bad_code = make([sampler(2), verifier("python", code="def (:")], {"s": "v.scores"}, REF_INPUTS)
    assert [i.code for i in validate(bad_code, REGISTRY)] == ["bad_param"]


# ------------------------------------------------------------------ voter


def voter(method: str, source: str = "s", **params: Any) -> dict[str, Any]:
    return {"id": "vote", "kind": "voter", "params": {"method": method, **params},
            "inputs": {"candidates": f"{source}.candidates"}}


def test_majority_vote_through_the_scheduler_does_not_touch_its_input() -> None:
    wf = make([sampler(5), voter("majority", extract="last_number")],
              {"answer": "vote.answer", "votes": "vote.result", "c": "vote.candidates", "raw": "s.candidates"})
    result, rec = run(wf, replies=["so 7", "8", "7.0", "dunno", "seven is 7"])
    assert result.outputs["answer"] == "7"
    votes = result.outputs["votes"]
    assert votes["no_answer_count"] == 1
    assert sum(c["count"] for c in votes["clusters"]) + votes["no_answer_count"] == 5
    out: CandidateSet = result.outputs["c"]
    assert out.winner == 0 and [c.cluster for c in out.candidates] == [0, 1, 0, None, 0]
    assert all(c.cluster is None for c in result.outputs["raw"].candidates)  # upstream output untouched
    (event,) = node_events(rec, "vote")
    assert event["answer"] == "7" and event["total"] == 5


def test_score_based_votes_need_scores() -> None:
    result, _ = run(make([sampler(2), voter("weighted")], {"a": "vote.answer"}))
    assert result.status == FAILED and "verifier" in result.error


def test_weighted_best_of_n_threshold_and_mbr_votes() -> None:
    base = [sampler(4), verifier("contains")]
    replies = ["it is 7", "8", "8", "7"]
    got = {}
    for method, params in [("weighted", {"extract": "last_number"}), ("best_of_n", {"extract": "last_number"}),
                           ("threshold", {"threshold": 0.5, "extract": "last_number"}),
                           ("mbr", {"utility": "token_f1", "extract": "last_number"})]:
        result, _ = run(make([*base, voter(method, "v", **params)], {"a": "vote.answer", "r": "vote.result"},
                             REF_INPUTS), replies=replies)
        got[method] = (result.outputs["a"], result.outputs["r"]["winner"])
    assert got["weighted"] == ("7", 0)  # 7: 1 + 1 = 2 beats 8: 0 + 0 although both have two votes
    assert got["best_of_n"] == ("7", 0)
    assert got["threshold"] == ("7", 0)
    assert got["mbr"][1] in (1, 2)  # "8" agrees with the other "8" exactly: highest expected F1


def test_voter_on_an_empty_vote_gives_no_answer() -> None:
    wf = make([sampler(3), voter("majority", extract="last_number")], {"a": "vote.answer", "r": "vote.result"})
    result, _ = run(wf, replies=["none", "nothing", "nope"])
    assert result.status == SUCCEEDED
    assert result.outputs["a"] == "" and result.outputs["r"]["no_answer_count"] == 3


# ------------------------------------------------------------------ refiner


def refiner(**params: Any) -> dict[str, Any]:
    return {"id": "r", "kind": "refiner", "params": {"prompt": "{question}", **params},
            "inputs": {"question": "inputs.question"}}


def test_refiner_stops_when_the_check_passes_and_records_every_iteration() -> None:
    wf = make([refiner(check="regex", regex="Answer: 7", feedback="both", max_iters=3)],
              {"text": "r.text", "its": "r.iterations", "c": "r.candidates"})
    result, rec = run(wf, by_prompt={"Point out": "It is wrong.", "Feedback:": "Answer: 7", "What is": "Answer: 6"})
    its = result.outputs["its"]
    assert result.outputs["text"] == "Answer: 7"
    assert [it["draft"] for it in its] == ["Answer: 6", "Answer: 7"]
    assert its[0]["score"] == 0.0 and its[1]["score"] == 1.0
    assert "no match for /Answer: 7/" in its[0]["feedback"] and "It is wrong." in its[0]["feedback"]
    assert its[0]["revision"] == "Answer: 7"
    (event,) = node_events(rec, "refine")
    assert event["stopped"] == "threshold" and event["chosen"] == 1
    assert [c["tag"].get("step") for c in (e.data for e in rec.of_type("lm_call"))] == ["draft", "feedback", "revise"]
    assert result.outputs["c"].winner == 1


def test_refiner_stops_on_no_issues_and_on_unchanged_drafts() -> None:
    wf = make([refiner(max_iters=3)], {"its": "r.iterations"})
    result, rec = run(wf, by_prompt={"Point out": "No issues.", "What is": "7"})
    assert len(result.outputs["its"]) == 1 and node_events(rec, "refine")[0]["stopped"] == "no_issues"
    result, rec = run(wf, by_prompt={"Point out": "Add detail.", "Feedback:": "7", "What is": "7"})
    assert node_events(rec, "refine")[0]["stopped"] == "unchanged"
    assert result.outputs["its"][0]["revision"] == "7"


def test_refiner_runs_max_iters_and_can_start_from_a_wired_draft() -> None:
    wf = make([refiner(max_iters=2)], {"its": "r.iterations"})
    replies = iter(["draft", "critique 1", "rev 1", "critique 2", "rev 2"])
    result, rec = run(wf, reply_fn=lambda prompt, seed: next(replies))
    its = result.outputs["its"]
    assert [it["draft"] for it in its] == ["draft", "rev 1", "rev 2"]
    assert its[-1]["feedback"] is None and node_events(rec, "refine")[0]["stopped"] == "max_iters"
    wired = make([{"id": "g", "kind": "generator", "params": {"prompt": "{question}"},
                   "inputs": {"question": "inputs.question"}},
                  {**refiner(max_iters=1), "inputs": {"question": "inputs.question", "draft": "g.text"}}],
                 {"its": "r.iterations"})
    result, rec = run(wired, by_prompt={"Point out": "No issues.", "What is": "from generator"})
    assert result.outputs["its"][0]["draft"] == "from generator"
    assert sum(1 for e in rec.of_type("lm_call") if e.node_id == "r") == 1  # only the critique


def test_refiner_param_checks() -> None:
    wf = make([refiner(feedback="verifier")], {"t": "r.text"})
    assert [i.code for i in validate(wf, REGISTRY)] == ["bad_param"]


# ------------------------------------------------------------------ search


def stepper(prompt: str, seed: int) -> str:
    """Each expansion writes one step; the third step answers."""
    done = prompt.count("step ")
    if done >= 2:
        return f"Answer: {7 + seed % 2}\n"
    return f"step {seed % 5} of {done}\nmore"


def search(**params: Any) -> dict[str, Any]:
    return {"id": "x", "kind": "search",
            "params": {"prompt": "{question}", "step_delimiter": "\n", "max_depth": 4, **params},
            "inputs": {"question": "inputs.question"}}


def check_tree(tree: dict[str, Any]) -> None:
    nodes = {n["id"]: n for n in tree["nodes"]}
    for n in nodes.values():
        if n["parent"] is not None:
            assert nodes[n["parent"]]["depth"] + 1 == n["depth"]
    path = tree["chosen_path"]
    assert path[0] == 0 and all(nodes[b]["parent"] == a for a, b in itertools.pairwise(path))
    assert all(nodes[i]["chosen"] and not nodes[i]["pruned"] for i in path)
    assert sum(n["chosen"] for n in nodes.values()) == len(path)


def test_beam_search_keeps_beam_width_per_depth_and_reports_the_tree() -> None:
    wf = make([search(strategy="beam", beam_width=2, expand_k=3, scorer="likelihood"),
               voter("best_of_n", "x", extract="last_number")],
              {"text": "x.text", "tree": "x.tree", "c": "x.candidates", "a": "vote.answer"})
    result, rec = run(wf, reply_fn=stepper)
    tree = result.outputs["tree"]
    check_tree(tree)
    by_depth: dict[int, list[dict[str, Any]]] = {}
    for n in tree["nodes"][1:]:
        by_depth.setdefault(n["depth"], []).append(n)
    assert len(by_depth[1]) == 3 and sum(not n["pruned"] for n in by_depth[1]) == 2
    assert len(by_depth[2]) == 6 and len(by_depth[3]) == 6
    assert all(n["terminal"] and n["finish"] == "end_marker" for n in by_depth[3])
    assert result.outputs["text"].endswith(tree["nodes"][tree["chosen_path"][-1]]["text"])
    assert result.outputs["text"].count("\n") == 2
    assert len(result.outputs["c"]) == 6 and result.outputs["a"] in ("7", "8")
    expand_calls = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "expand"]
    assert len(expand_calls) == 3 * (1 + 2 + 2)
    assert {c["tag"]["depth"] for c in expand_calls} == {1, 2, 3}
    (event,) = node_events(rec, "tree")
    assert event["chosen_path"] == tree["chosen_path"]


def test_best_first_search_expands_the_best_node_within_its_budget() -> None:
    wf = make([search(strategy="best_first", expand_k=2, max_expansions=3, scorer="llm_judge")],
              {"text": "x.text", "tree": "x.tree"})
    result, _ = run(wf, reply_fn=stepper)
    tree = result.outputs["tree"]
    check_tree(tree)
    assert tree["expansions"] <= 3
    assert len(tree["nodes"]) == 1 + 2 * tree["expansions"]


def test_search_marks_max_depth_and_end_of_generation_as_terminal() -> None:
    wf = make([search(max_depth=2, scorer="none")], {"tree": "x.tree", "text": "x.text"})
    result, _ = run(wf, reply_fn=lambda prompt, seed: "going on\nmore")
    finishes = {n["finish"] for n in result.outputs["tree"]["nodes"] if n["depth"] == 2}
    assert finishes == {"max_depth"}
    result, _ = run(wf, replies=["the end"])  # no delimiter: the model ended generation
    assert {n["finish"] for n in result.outputs["tree"]["nodes"][1:]} == {"eog"}
    check_tree(result.outputs["tree"])


def test_invalid_workflows_fail_before_any_model_call() -> None:
    wf = make([search(step_delimiter="")], {"t": "x.text"})
    with pytest.raises(WorkflowError) as err:
        run(wf)
    assert [i.code for i in err.value.issues] == ["bad_param"]


def test_generator_for_each_maps_the_prompt_over_a_candidate_set() -> None:
    wf = make([sampler(3), {"id": "g", "kind": "generator",
                            "params": {"prompt": "Final answer of: {draft}", "for_each": "draft"},
                            "inputs": {"draft": "s.candidates"}}], {"c": "g.candidates", "t": "g.text"})
    result, rec = run(wf, by_prompt={"Final answer of: a": "A", "Final answer of: b": "B", "Final answer of: c": "C"},
                      replies=["a", "b", "c"])
    out: CandidateSet = result.outputs["c"]
    assert out.texts() == ["A", "B", "C"]
    assert [c.meta["from"]["index"] for c in out.candidates] == [0, 1, 2]
    assert result.outputs["t"] == "[1] A\n\n[2] B\n\n[3] C"
    assert sorted(e.data["tag"]["item"] for e in rec.of_type("lm_call") if e.node_id == "g") == [0, 1, 2]


def test_generator_for_each_checks() -> None:
    unused = make([sampler(2), {"id": "g", "kind": "generator", "params": {"prompt": "{d}", "for_each": "x"},
                                "inputs": {"d": "s.candidates"}}], {"t": "g.text"})
    assert [i.code for i in validate(unused, REGISTRY)] == ["bad_param"]
    not_a_set = make([{"id": "g", "kind": "generator", "params": {"prompt": "{question}", "for_each": "question"},
                       "inputs": {"question": "inputs.question"}}], {"t": "g.text"})
    result, _ = run(not_a_set)
    assert result.status == FAILED and "must be a candidate set" in result.error


def test_search_redraws_a_step_once_when_the_model_starts_with_a_blank_line() -> None:
    def blank_first(prompt: str, seed: int) -> str:
        # the model wants a blank line before every step: right after a single "\n" it writes "\n" first
        if not prompt.endswith("\n\n"):
            return "\nlater"
        return "Answer: 7" if prompt.count("step") >= 1 else f"step {seed % 3}\nmore"

    wf = make([search(max_depth=3, expand_k=2, beam_width=1, scorer="none")],
              {"tree": "x.tree", "text": "x.text"})
    result, rec = run(wf, reply_fn=blank_first)
    tree = result.outputs["tree"]
    check_tree(tree)
    steps = tree["nodes"][1:]
    assert all(n["finish"] != "empty" and n["lead"] == "\n" for n in steps)
    assert [n["depth"] for n in steps] == [1, 1, 2, 2]
    expand = [e.data for e in rec.of_type("lm_call") if e.data["purpose"] == "expand"]
    assert [c["tag"]["lead"] for c in expand] == ["", "", "\n", "\n", "", "", "\n", "\n"]
    # the second step's prompt holds the first step as the model wrote it, blank line included
    assert "<|assistant|>\n\nstep" in expand[-1]["prompt"] and expand[-1]["prompt"].endswith("\n\n")
    assert result.outputs["text"].startswith("step") and result.outputs["text"].endswith("\n\nAnswer: 7")


def test_search_marks_a_step_empty_when_the_redraw_is_blank_too() -> None:
    wf = make([search(max_depth=2, expand_k=2, scorer="none")], {"tree": "x.tree", "text": "x.text"})
    result, _ = run(wf, replies=["\nnothing"])
    nodes = result.outputs["tree"]["nodes"][1:]
    assert len(nodes) == 2 and all(n["finish"] == "empty" and n["pruned"] for n in nodes)
    assert result.outputs["text"] == ""
