"""Sub-workflow cost: best-of-4 refined drafts through `map` versus the same flat workflow written out by hand,
and the overhead of a workflow node around a one-node child.

1. Real bundled model (run under the heavy lock): four drafts (four generators cut at the same length, the same
   in both, so that they end together like a sampler's) -> critique ->
   revise per draft -> collect -> LLM judge -> best-of-N. `mapped` runs critique -> revise as the child
   refine_each mapped over the drafts; `flat` writes the four critique -> revise chains out by hand. Critique and
   revise decode greedily, so both versions generate the same tokens up to the engine's batch numerics. A third
   version, `mapped_sampler`, draws the drafts with one sampler (N=4) as best_of_refined.yaml does. Printed: wall
   time of each (median of --repeats, after one warm-up of each), the ratios to flat (target <= 1.05), and the
   engine's counters over the runs (decode calls, tokens per decode call, prompt tokens evaluated and cached).
2. Zero-latency fake backend: a one-node flat workflow versus the same node inside a workflow node; the
   difference per run is the workflow node's overhead (target <= 5 ms).
Run: flock /tmp/metagen-heavy.lock nice .venv/bin/python benchmarks/bench_subworkflows.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.run.providers import fake_provider
from app.run.scheduler import Scheduler
from app.workflow.spec import load_workflow
from app.workflow.subworkflows import ChildLoader
from nodes.registry import default_registry

QUESTION = "What is the capital of Australia?"
DRAFTS = 4
CRITIQUE = "Question: {question}\nDraft answer: {draft}\nIn one sentence, name the main weakness of the draft."
REVISE = "Question: {question}\nDraft answer: {draft}\nCritique: {critique}\nWrite an improved answer in one sentence."


def _quoted(text: str) -> str:
    return "'" + text.replace("'", "''").replace("\n", "\\n") + "'"


def _generator(node_id: str, prompt: str, inputs: str, temperature: float, max_tokens: int = 32) -> str:
    return (f"- id: {node_id}\n  kind: generator\n  params: {{prompt: \"{prompt}\", max_tokens: {max_tokens}, "
            f"temperature: {temperature}}}\n  inputs: {{{inputs}}}\n")


def _head(name: str) -> str:
    return (f"version: 1\nname: {name}\nmodels:\n  main: {{source: bundled}}\ninputs:\n"
            f"  question: {{type: text, default: {_quoted(QUESTION)}}}\nnodes:\n")


def _drafts() -> str:
    # drafts cut at max_tokens (a long answer is asked for) end together, as a sampler's N drafts do: the flat
    # chains cannot start early on a short draft, so both versions wait for the same drafts
    return "".join(_generator(f"d{i}", "{question} Explain your answer in three sentences.",
                              "question: inputs.question", 0.8, max_tokens=16) for i in range(DRAFTS))


def _tail(candidates: str) -> str:
    return ("- id: judge\n  kind: verifier\n  params:\n    method: llm_judge\n    judge_prompt: \"Question: "
            "{question}\\nProposed answer: {candidate}\\nIs the proposed answer correct? Reply Yes or No.\"\n"
            f"  inputs: {{candidates: {candidates}, question: inputs.question}}\n"
            "- id: pick\n  kind: voter\n  params: {method: best_of_n, extract: full_text, normalize: none}\n"
            "  inputs: {candidates: judge.candidates}\noutputs: {answer: pick.best}\n")


def _escaped(text: str) -> str:
    return text.replace("\n", "\\n")


def write_workflows(folder: Path) -> None:
    child = ("version: 1\nname: refine\nmodels:\n  main: {source: bundled}\ninputs:\n  question: {type: text}\n"
             "  draft: {type: text}\nnodes:\n"
             + _generator("critique", _escaped(CRITIQUE), "question: inputs.question, draft: inputs.draft", 0.0)
             + _generator("revise", _escaped(REVISE), "question: inputs.question, draft: inputs.draft, "
                          "critique: critique.text", 0.0)
             + "outputs: {answer: revise.text}\n")
    gathered = ", ".join(f"d{i}: d{i}.text" for i in range(DRAFTS))
    mapped = (_head("mapped") + _drafts()
              + f"- id: drafts\n  kind: collect\n  inputs: {{{gathered}}}\n"
              + "- id: refine_each\n  kind: workflow\n  map: draft\n"
              + "  params: {workflow: refine, models: {main: main}}\n"
              + "  inputs: {draft: drafts.candidates, question: inputs.question}\n"
              + _tail("refine_each.candidates"))
    chains = "".join(
        _generator(f"critique{i}", _escaped(CRITIQUE), f"question: inputs.question, draft: d{i}.text", 0.0)
        + _generator(f"revise{i}", _escaped(REVISE), f"question: inputs.question, draft: d{i}.text, "
                     f"critique: critique{i}.text", 0.0) for i in range(DRAFTS))
    revised = ", ".join(f"r{i}: revise{i}.text" for i in range(DRAFTS))
    flat = (_head("flat") + _drafts() + chains + f"- id: refined\n  kind: collect\n  inputs: {{{revised}}}\n"
            + _tail("refined.candidates"))
    sampler = ("- id: drafts\n  kind: sampler\n  params: {prompt: \"{question} Explain your answer in three "
               f"sentences.\", n: {DRAFTS}, max_tokens: 16, temperature: 0.8}}\n"
               "  inputs: {question: inputs.question}\n")
    mapped_sampler = (_head("mapped_sampler") + sampler
                      + "- id: refine_each\n  kind: workflow\n  map: draft\n"
                      + "  params: {workflow: refine, models: {main: main}}\n"
                      + "  inputs: {draft: drafts.candidates, question: inputs.question}\n"
                      + _tail("refine_each.candidates"))
    for name, text in (("refine", child), ("mapped", mapped), ("mapped_sampler", mapped_sampler), ("flat", flat)):
        (folder / f"{name}.yaml").write_text(text, encoding="utf-8")


def _engine_stats(scheduler: Scheduler) -> dict[str, Any]:
    from backends.base import ModelSpec

    backend = scheduler.provider(ModelSpec())
    return dict(backend.info()["engine"])


COUNTERS = ("decode_calls", "tokens_decoded", "decode_s_total", "prompt_tokens_evaluated", "prompt_tokens_cached",
            "completion_tokens")


def model_comparison(folder: Path, repeats: int) -> None:
    from app.run.providers import llama_provider

    scheduler = Scheduler(default_registry(), llama_provider(), children=ChildLoader((folder,)))
    names = ("mapped", "mapped_sampler", "flat")
    workflows = {name: load_workflow(folder / f"{name}.yaml") for name in names}
    times: dict[str, list[float]] = {name: [] for name in names}
    totals: dict[str, dict[str, float]] = {name: dict.fromkeys(COUNTERS, 0.0) for name in names}
    for wf in workflows.values():  # warm-up: the model loads, the prompt cache fills the same way for all
        scheduler.run(wf, seed=0, use_cache=False)
    for repeat in range(repeats):
        order = names[repeat % len(names):] + names[:repeat % len(names)]  # each goes first in turn
        for name in order:
            before = _engine_stats(scheduler)
            start = time.perf_counter()
            result = scheduler.run(workflows[name], seed=repeat + 1, use_cache=False)
            times[name].append(time.perf_counter() - start)
            after = _engine_stats(scheduler)
            assert result.status == "succeeded", result.error
            for key in COUNTERS:
                totals[name][key] += after[key] - before[key]
    print(f"best-of-{DRAFTS} refined drafts on the bundled model, median of {repeats} runs each (seeds 1..{repeats}; "
          "engine counters summed over the runs):")
    flat = statistics.median(times["flat"])
    for name in names:
        t = totals[name]
        median = statistics.median(times[name])
        print(f"  {name:14s} {median:6.2f} s  x{median / flat:.3f} of flat  | in decode {t['decode_s_total']:.1f} s "
              f"of {sum(times[name]):.1f} s, decode calls {t['decode_calls']:.0f}, "
              f"{t['tokens_decoded'] / max(1, t['decode_calls']):.2f} tokens/decode, prompt tokens evaluated "
              f"{t['prompt_tokens_evaluated']:.0f} / cached {t['prompt_tokens_cached']:.0f}, completion tokens "
              f"{t['completion_tokens']:.0f}")
    print(f"  map / flat time ratio (same drafts): {statistics.median(times['mapped']) / flat:.3f} (target <= 1.05); "
          f"with a sampler's drafts: {statistics.median(times['mapped_sampler']) / flat:.3f}")
    print(f"  most requests in flight (engine, whole session): {_engine_stats(scheduler)['max_active_requests']}")


def overhead(runs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        one = ("version: 1\nname: one\ninputs:\n  text: {type: text, default: hello}\nnodes:\n- id: t\n"
               "  kind: template\n  params: {template: '<{text}>'}\n  inputs: {text: inputs.text}\n"
               "outputs: {answer: t.text}\n")
        wrapped = ("version: 1\nname: wrapped\ninputs:\n  text: {type: text, default: hello}\nnodes:\n- id: w\n"
                   "  kind: workflow\n  params: {workflow: one}\n  inputs: {text: inputs.text}\n"
                   "outputs: {answer: w.answer}\n")
        (folder / "one.yaml").write_text(one, encoding="utf-8")
        (folder / "wrapped.yaml").write_text(wrapped, encoding="utf-8")
        scheduler = Scheduler(default_registry(), fake_provider(), children=ChildLoader((folder,)))
        per_run: dict[str, float] = {}
        for name in ("one", "wrapped", "one", "wrapped"):  # the second pass counts (warm imports and caches)
            wf = load_workflow(folder / f"{name}.yaml")
            start = time.perf_counter()
            for _ in range(runs):
                result = scheduler.run(wf, use_cache=False)
            per_run[name] = (time.perf_counter() - start) / runs
            assert result.outputs == {"answer": "<hello>"}
    extra_ms = (per_run["wrapped"] - per_run["one"]) * 1000
    print(f"workflow node around a one-node child (fake backend, {runs} runs each): flat "
          f"{per_run['one'] * 1000:.2f} ms/run, wrapped {per_run['wrapped'] * 1000:.2f} ms/run, "
          f"overhead {extra_ms:.2f} ms (target <= 5 ms)")


def structure(folder: Path, latency_s: float = 0.05, repeats: int = 5) -> None:
    """The same three workflows on a fake model answering each request after `latency_s`: what the scheduler
    itself adds on the critical path (no engine, no machine noise beyond thread wake-ups)."""
    from backends.fake import FakeBackend

    fake = FakeBackend(latency_s=latency_s)
    scheduler = Scheduler(default_registry(), lambda spec: fake, children=ChildLoader((folder,)))
    medians = {}
    for name in ("mapped", "mapped_sampler", "flat"):
        wf = load_workflow(folder / f"{name}.yaml")
        times = []
        for seed in range(repeats):
            start = time.perf_counter()
            scheduler.run(wf, seed=seed, use_cache=False)
            times.append(time.perf_counter() - start)
        medians[name] = statistics.median(times)
    print(f"the same workflows on a fake model ({latency_s * 1000:.0f} ms a request, median of {repeats}): "
          + ", ".join(f"{n} {t * 1000:.0f} ms" for n, t in medians.items())
          + f"; map / flat {medians['mapped'] / medians['flat']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="model runs of each workflow (median)")
    parser.add_argument("--overhead-runs", type=int, default=200)
    parser.add_argument("--no-model", action="store_true", help="only the overhead measurement")
    args = parser.parse_args()
    overhead(args.overhead_runs)
    with tempfile.TemporaryDirectory() as tmp:
        write_workflows(Path(tmp))
        structure(Path(tmp))
        if not args.no_model:
            model_comparison(Path(tmp), args.repeats)


if __name__ == "__main__":
    main()
