"""Issue 32's three share-mode bombs, scaled down (fake backend, except the PRM tokenising on the bundled model):
threads held and time to cancel of a nested mapped fan-out, the PRM chat layout and time to cancel, tokenising past
the context, and the validation / page-load cost of a sub-workflow tree used W times per level.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_share_bombs.py [--no-model]

Runs against whatever `app` is importable, so the same script measures an older checkout (PYTHONPATH=that tree).
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from app.run.scheduler import Budget, Scheduler
from app.workflow import validation
from app.workflow.spec import load_workflow, workflow_from_dict
from app.workflow.subworkflows import ChildLoader
from backends.base import CancelToken
from backends.fake import FakeBackend
from nodes.algorithms import prm
from nodes.registry import default_registry
from tests.core.subworkflow_trees import fanout_tree, wide_tree

REGISTRY = default_registry()
WAIT_S = 30.0


class PeakThreads:
    """Samples threading.active_count() every 10 ms on its own thread."""

    def __init__(self) -> None:
        self.peak = threading.active_count()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.01):
            self.peak = max(self.peak, threading.active_count())

    def stop(self) -> int:
        self._stop.set()
        return self.peak


def _run_async(sched: Scheduler, wf: Any, **kw: Any) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def body() -> None:
        out["result"] = sched.run(wf, {}, use_cache=False, **kw)
        out["end"] = time.perf_counter()

    thread = threading.Thread(target=body, daemon=True)
    thread.start()
    return thread, out


def fan_out(width: int, cancel_after: float | None) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        top = fanout_tree(folder, width=width, depth=3)
        sched = Scheduler(REGISTRY, lambda spec: FakeBackend(), children=ChildLoader((folder,)))
        sched.stop_grace_s = 2.0  # the new code's grace; ignored by older code
        base = threading.active_count()
        peak = PeakThreads()
        cancel = CancelToken()
        start = time.perf_counter()
        thread, out = _run_async(sched, load_workflow(folder / f"{top}.yaml"), cancel=cancel,
                                 budget=Budget(max_seconds=cancel_after) if cancel_after else None)
        thread.join(WAIT_S + (cancel_after or 0))
        threads = peak.stop() - base
        runs = width + width**2 + width**3
        if "result" not in out:
            return (f"fan-out W={width}x3 ({runs} child runs), time cap {cancel_after}s: still running after "
                    f"{time.perf_counter() - start:.1f}s, peak +{threads} threads")
        res = out["result"]
        took = out["end"] - start
        after = f", ended {took - cancel_after:.2f}s after the cap" if cancel_after else ""
        return (f"fan-out W={width}x3 ({runs} child runs): {res.status} in {took:.2f}s{after}, peak +{threads} "
                f"threads, {res.stats.nodes_run} nodes run")


class _Stuck(FakeBackend):
    """`Critique` requests wait on an event, never looking at the cancel token."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def generate(self, prompt: Any, params: Any, *args: Any, **kw: Any) -> Any:
        if "Critique" in str(prompt):
            self.entered.set()
            self.release.wait(120)
        return super().generate(prompt, params, *args, **kw)


def stuck_child() -> str:
    from tests.core.test_subworkflows import CHILD, PARENT

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "refine.yaml").write_text(CHILD)
        (folder / "parent.yaml").write_text(PARENT)
        backend = _Stuck()
        sched = Scheduler(REGISTRY, lambda spec: backend, children=ChildLoader((folder,)))
        sched.stop_grace_s = 2.0
        cancel = CancelToken()
        thread, out = _run_async(sched, load_workflow(folder / "parent.yaml"), cancel=cancel)
        backend.entered.wait(10)
        cancel.cancel("cancelled by the user")
        cancelled = time.perf_counter()
        thread.join(WAIT_S)
        backend.release.set()
        if "result" not in out:
            return f"mapped child stuck on a wait, cancelled: still running {WAIT_S:.0f}s after the cancel"
        return (f"mapped child stuck on a wait, cancelled: {out['result'].status} "
                f"{out['end'] - cancelled:.2f}s after the cancel")


def _render(messages: list[dict[str, str]], gen: bool) -> str:
    text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages)
    return text + ("<|assistant|>\n" if gen else "")


def prm_layout(steps: int) -> str:
    start = time.perf_counter()
    prm.chat_segments("Q?", [f"s{i}" for i in range(steps)], "+", _render)
    return f"PRM chat layout of {steps} steps: {time.perf_counter() - start:.2f}s"


def prm_cancel(steps: int, cancel_at: float) -> str:
    text = " ".join(f"s{i}" for i in range(steps))
    wf = workflow_from_dict({
        "version": 1, "name": "prm", "inputs": {"question": {"type": "text", "default": "q"}}, "nodes": [
            {"id": "s", "kind": "sampler", "params": {"n": 1, "prompt": "{question}", "max_tokens": 4096},
             "inputs": {"question": "inputs.question"}},
            {"id": "v", "kind": "verifier", "params": {"method": "prm", "prm_format": "chat", "step_delimiter": " ",
                                                       **({"max_steps": prm.MAX_STEPS}
                                                          if hasattr(prm, "MAX_STEPS") else {})},
             "inputs": {"candidates": "s.candidates", "question": "inputs.question"}}],
        "outputs": {"scores": "v.scores"}})
    backend = FakeBackend(replies=[text], step_fn=lambda t, tok: -0.5)
    sched = Scheduler(REGISTRY, lambda spec: backend)
    cancel = CancelToken()
    start = time.perf_counter()
    thread, out = _run_async(sched, wf, cancel=cancel)
    time.sleep(cancel_at)
    cancel.cancel("cancelled by the user")
    cancelled = time.perf_counter()
    thread.join(WAIT_S)
    if "result" not in out:
        return f"PRM chat, {steps} steps, cancel at {cancel_at}s: still running {WAIT_S:.0f}s after the cancel"
    return (f"PRM chat, {steps} steps, cancel at {cancel_at}s: {out['result'].status}, ended "
            f"{max(0.0, out['end'] - cancelled):.2f}s after the cancel (run {out['end'] - start:.2f}s)")


def prm_tokenise(steps: int) -> str:
    from backends.base import ModelSpec
    from backends.llama.models.bundled import bundled_model_path
    from backends.llama.worker.llama_backend import LlamaBackend

    llama = LlamaBackend(bundled_model_path(), ModelSpec(device="cpu", n_ctx=1024))
    try:
        seq = prm.tagged_segments("Question: add.", [f"Step {i}: 1 + {i} = {i + 1}." for i in range(steps)], "\n",
                                  " Correct?")
        start = time.perf_counter()
        try:
            llama.step_logprobs([seq], (" yes", " no"))
            what = "scored"
        except Exception as exc:  # the context overflow expected here
            what = type(exc).__name__
        tokenising = time.perf_counter() - start
        start = time.perf_counter()
        prm.chat_segments("Question: add.", [f"Step {i}." for i in range(steps // 2)], "+",
                          lambda m, gen: llama.render_prompt(m, add_generation_prompt=gen))
        return (f"PRM tokenising {steps} tagged steps (n_ctx 1024): {what} after {tokenising:.3f}s; chat layout of "
                f"{steps // 2} steps with the bundled model's template: {time.perf_counter() - start:.2f}s")
    finally:
        llama.close()


def validation_cost(uses: int, depth: int) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        top = wide_tree(folder, uses=uses, depth=depth)
        wf = load_workflow(folder / f"{top}.yaml")
        start, cpu = time.perf_counter(), time.process_time()
        checked = validation.check(wf, REGISTRY, ChildLoader((folder,)))
        wall, used = time.perf_counter() - start, time.process_time() - cpu
        codes = sorted({i.code for i in checked.issues if i.severity == "error"})
        instances = sum(uses**k for k in range(1, depth + 1))
        return (f"check of a tree {uses} uses x {depth} levels ({instances} instances): {wall:.2f}s wall, "
                f"{used:.2f}s CPU, errors {codes or 'none'}")


def page_loads(uses: int, depth: int) -> str:
    from app.service.studio import StudioService
    from app.share.policy import SharePolicy

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "wf"
        service = StudioService(policy=SharePolicy.local(), provider=lambda spec: FakeBackend(), dry_run=True,
                                workflows_dir=folder, examples_dir=Path(tmp) / "none", models_dir=Path(tmp),
                                trace_db=Path(tmp) / "t.db")
        wide_tree(folder, uses=uses, depth=depth)
        times = []
        for _ in range(3):
            start = time.perf_counter()
            service.workflow_ports()
            times.append(time.perf_counter() - start)
        return (f"page load (workflow_ports) with a {uses} x {depth} tree in the folder: first {times[0]:.2f}s, "
                f"then {times[1]:.3f}s, {times[2]:.3f}s")


def main() -> None:
    lines = [
        fan_out(10, None),
        fan_out(16, 0.3),
        stuck_child(),
        prm_layout(5000),
        prm_cancel(3000, 0.3),
        validation_cost(6, 3),
        validation_cost(12, 4),
        page_loads(12, 3),
    ]
    for line in lines:
        print(line, flush=True)
    if "--no-model" not in sys.argv:
        print(prm_tokenise(2000), flush=True)
    os._exit(0)  # an older run may leave non-daemon worker threads behind


if __name__ == "__main__":
    main()
